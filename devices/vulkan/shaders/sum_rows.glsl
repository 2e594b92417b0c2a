// sum_rows.glsl — SUM_ROWS (het/graph.h): dst[0, i1, i2, i3] = the sum of
// row (i1, i2, i3) of src0 (F32). One workgroup per row, each invocation
// summing its strided elements, then the workgroup reduction (reduce.glsl):
// float, pairwise across invocations (the CPU sums in double; they agree
// to float rounding). Any strides.
#include "subgroup_ext.glsl"
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_nb1, d_nb2, d_nb3;
    uint a_off, d_off;
} p;

void main()
{
    uint row = group_id();
    if (row >= p.ne1 * p.ne2 * p.ne3) return; // whole workgroup leaves together
    uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    uint ab = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    float s = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.ne0; i += WG) s += LD_F32(s0, ab + i * p.a_nb0);
    s = wg_sum(s);
    if (gl_LocalInvocationID.x == 0u) st_f32(p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3, s);
}
