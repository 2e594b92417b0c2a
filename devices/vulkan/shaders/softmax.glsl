// softmax.glsl — row-wise softmax(x*scale + mask) with an optional causal
// limit: element j of row i1 is dropped when causal_past >= 0 and
// j > i1 + causal_past. The mask (F32) is indexed (j, i1 % m_ne1,
// i2 % m_ne2, i3 % m_ne3). A row with nothing left is written as zeros. One workgroup
// per row; three passes (max, sum, write) re-read the row; in-place safe.
#include "subgroup_ext.glsl"
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint m_nb0, m_nb1, m_nb2, m_nb3;
    uint m_ne1, m_ne2, m_ne3;
    uint a_off, d_off, m_off;
    uint has_mask;
    float scale;
    int causal_past;
} p;

float value(uint ab, uint mb, uint i1, uint j)
{
    if (p.causal_past >= 0 && int(j) > int(i1) + p.causal_past) return NEG_BIG;
    float v = LD_F32(s0, ab + j * p.a_nb0) * p.scale;
    if (p.has_mask != 0u) v += LD_F32(s1, mb + j * p.m_nb0);
    return max(v, NEG_BIG); // -inf in the mask becomes the sentinel
}

void main()
{
    uint row = group_id();
    if (row >= p.ne1 * p.ne2 * p.ne3) return;
    uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    uint ab = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    uint db = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    uint mb = p.m_off + (i1 % p.m_ne1) * p.m_nb1 + (i2 % p.m_ne2) * p.m_nb2 + (i3 % p.m_ne3) * p.m_nb3;
    uint t = gl_LocalInvocationID.x;

    float mx = NEG_BIG;
    for (uint j = t; j < p.ne0; j += WG) mx = max(mx, value(ab, mb, i1, j));
    mx = wg_max(mx);
    float s = 0.0;
    for (uint j = t; j < p.ne0; j += WG) {
        float v = value(ab, mb, i1, j);
        s += v <= NEG_BIG ? 0.0 : exp(v - mx);
    }
    s = wg_sum(s);
    float inv = s > 0.0 ? 1.0 / s : 0.0;
    for (uint j = t; j < p.ne0; j += WG) {
        float v = value(ab, mb, i1, j);
        st_f32(db + j * p.d_nb0, v <= NEG_BIG ? 0.0 : exp(v - mx) * inv);
    }
}
