#version 450
// top_k.comp — TOP_K (het/graph.h): per row of src0 (F32, n = ne0), the I32
// indices of its k largest values, largest first; equal values in index
// order; NaN ranks below every number (NaNs among themselves by index).
// One workgroup per row (dims 1..3 flattened), k selection passes: pass j
// finds, over the whole row, the element ranking first among those ranking
// after pass j-1's choice (the order is total, so each pass picks the next),
// each invocation over its strided elements, then a shared-memory tree.
// Any strides for the row and the indices.
#include "common.glsl"

layout(push_constant) uniform PC {
    uint ne0, ne1, ne2, ne3;         // src0 shape; dst is (k, ne1, ne2, ne3)
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, d_off, k;
} p;

#define NONE 0xFFFFFFFFu

shared float sel_v[WG];
shared uint  sel_i[WG];

// (va, ia) ranks before (vb, ib); NONE ranks after everything
bool before(float va, uint ia, float vb, uint ib)
{
    if (ia == NONE) return false;
    if (ib == NONE) return true;
    bool na = isnan(va), nb = isnan(vb);
    if (na || nb) return nb && (!na || ia < ib);
    return va > vb || (va == vb && ia < ib);
}

void main()
{
    uint row = group_id();
    if (row >= p.ne1 * p.ne2 * p.ne3) return; // whole workgroup leaves together
    uint i1 = row % p.ne1, i2 = (row / p.ne1) % p.ne2, i3 = row / (p.ne1 * p.ne2);
    uint ab = p.a_off + i1 * p.a_nb1 + i2 * p.a_nb2 + i3 * p.a_nb3;
    uint db = p.d_off + i1 * p.d_nb1 + i2 * p.d_nb2 + i3 * p.d_nb3;
    uint t = gl_LocalInvocationID.x;
    float prev_v = 0.0;
    uint prev_i = NONE; // nothing chosen yet: every element qualifies
    for (uint j = 0; j < p.k; j++) {
        float bv = 0.0;
        uint bi = NONE;
        for (uint i = t; i < p.ne0; i += WG) {
            float v = LD_F32(s0, ab + i * p.a_nb0);
            if ((prev_i == NONE || before(prev_v, prev_i, v, i)) && before(v, i, bv, bi)) {
                bv = v;
                bi = i;
            }
        }
        sel_v[t] = bv;
        sel_i[t] = bi;
        barrier();
        for (uint s = WG / 2; s > 0; s >>= 1) {
            if (t < s && before(sel_v[t + s], sel_i[t + s], sel_v[t], sel_i[t])) {
                sel_v[t] = sel_v[t + s];
                sel_i[t] = sel_i[t + s];
            }
            barrier();
        }
        prev_v = sel_v[0];
        prev_i = sel_i[0];
        barrier();
        if (t == 0u) sd.d[(db + j * p.d_nb0) >> 2] = prev_i;
    }
}
