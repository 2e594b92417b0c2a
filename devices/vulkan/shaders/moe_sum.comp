#version 450
// moe_sum.comp — MOE_SUM (het/graph.h): x (N, k, T) F32, w (k, T) F32 ->
// dst (N, T): dst[i, t] = sum over s = 0..k-1, in that order, of
// w[s, t] * x[i, s, t]. One invocation per destination element; any strides.
#include "common.glsl"

layout(push_constant) uniform PC {
    uint N, k, T;
    uint x_nb0, x_nb1, x_nb2;
    uint w_nb0, w_nb1;
    uint d_nb0, d_nb1;
    uint x_off, w_off, d_off;
} p;

void main()
{
    uint e = group_id() * WG + gl_LocalInvocationID.x;
    if (e >= p.N * p.T) return;
    uint i = e % p.N, t = e / p.N;
    uint xb = p.x_off + i * p.x_nb0 + t * p.x_nb2, wb = p.w_off + t * p.w_nb1;
    float acc = 0.0;
    for (uint s = 0; s < p.k; s++) acc += LD_F32(s1, wb + s * p.w_nb0) * LD_F32(s0, xb + s * p.x_nb1);
    st_f32(p.d_off + i * p.d_nb0 + t * p.d_nb1, acc);
}
