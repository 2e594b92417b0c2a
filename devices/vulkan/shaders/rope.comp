#version 450
// rope.comp — rotary position embedding on x (head_dim, n_head, n_tok, ne3)
// with I32 positions (src1) indexed by the token (dim 2). The first n_dims
// of each head rotate: pair i (i < n_dims/2) is (2i, 2i+1) in mode 0 and
// (i, i + n_dims/2) in NEOX mode 2, by theta = pos * freq_scale *
// base^(-2i/n_dims); the remaining elements are copied. One invocation per
// pair (or per two copied elements); reads both before writing: in-place safe.
// theta is reduced to [-pi, pi] in two steps (Cody-Waite) before sin/cos,
// whose accuracy is only specified there.
#include "common.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint p_nb0;
    uint a_off, p_off, d_off;
    uint n_dims, mode;
    float freq_base, freq_scale;
} p;

void main()
{
    uint half_dims = p.n_dims / 2u;
    uint slots = half_dims + (p.ne0 - p.n_dims + 1u) / 2u; // per row
    uint i = group_id() * WG + gl_LocalInvocationID.x;
    if (i >= slots * p.ne1 * p.ne2 * p.ne3) return;
    uint s = i % slots, r = i / slots;
    uint i1 = r % p.ne1; r /= p.ne1;
    uint i2 = r % p.ne2, i3 = r / p.ne2;
    uint ab = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    uint db = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    if (s >= half_dims) {
        uint e = p.n_dims + 2u * (s - half_dims);
        float x0 = LD_F32(s0, ab + e * p.a_nb0);
        bool two = e + 1u < p.ne0;
        float x1 = two ? LD_F32(s0, ab + (e + 1u) * p.a_nb0) : 0.0;
        st_f32(db + e * p.d_nb0, x0);
        if (two) st_f32(db + (e + 1u) * p.d_nb0, x1);
        return;
    }
    int pos = int(s1.d[(p.p_off + i2 * p.p_nb0) >> 2]);
    float theta = float(pos) * p.freq_scale * exp2(-2.0 * float(s) / float(p.n_dims) * log2(p.freq_base));
    float k = round(theta * 0.15915494309189535);
    theta = (theta - k * 6.28125) - k * 0.0019353071795864769;
    float c = cos(theta), sn = sin(theta);
    uint e0 = p.mode == 2u ? s : 2u * s;
    uint e1 = p.mode == 2u ? s + half_dims : 2u * s + 1u;
    float x0 = LD_F32(s0, ab + e0 * p.a_nb0);
    float x1 = LD_F32(s0, ab + e1 * p.a_nb0);
    st_f32(db + e0 * p.d_nb0, x0 * c - x1 * sn);
    st_f32(db + e1 * p.d_nb0, x0 * sn + x1 * c);
}
