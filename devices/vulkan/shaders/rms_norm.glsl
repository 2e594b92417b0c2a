// rms_norm.glsl — y = x / sqrt(mean(x^2) + eps) along dim 0; one workgroup
// per row (dims 1..3 flattened). F32 in and out, any strides, in-place safe.
#include "subgroup_ext.glsl"
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, d_off;
    float eps;
} p;

void main()
{
    uint row = group_id();
    if (row >= p.ne1 * p.ne2 * p.ne3) return; // whole workgroup leaves together
    uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    uint ab = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    uint db = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    float s = 0.0;
    for (uint i = gl_LocalInvocationID.x; i < p.ne0; i += WG) {
        float x = LD_F32(s0, ab + i * p.a_nb0);
        s += x * x;
    }
    s = wg_sum(s);
    float scale = inversesqrt(s / float(p.ne0) + p.eps);
    for (uint i = gl_LocalInvocationID.x; i < p.ne0; i += WG)
        st_f32(db + i * p.d_nb0, LD_F32(s0, ab + i * p.a_nb0) * scale);
}
