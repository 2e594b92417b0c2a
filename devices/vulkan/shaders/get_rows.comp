#version 450
// get_rows.comp — dst[:, i10, i11, i12] = row ids[i10, i11, i12] of
// src0[:, :, i11 % ne02, i12 % ne03], dequantised to F32 (VARIANT = src0 type). One
// workgroup per destination row, 8 elements per step. When src0 is larger
// than one descriptor, the host dispatches once per window of rows
// [row_lo, row_lo + row_cnt) bound at its first row; other ids are skipped.
// Out-of-range ids give a zero row (written by the window at row 0).
#include "common.glsl"
#include "quant.glsl"

layout(push_constant) uniform PC {
    uint K;                          // row length (ne00)
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint a_ne2, a_ne3;               // src0 batches, broadcast by modulo
    uint i_ne0, i_ne1, i_ne2;        // ids shape = destination rows
    uint i_nb0, i_nb1, i_nb2;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, i_off, d_off;
    uint row_lo, row_cnt, n_rows;    // window, and ne01
} p;

void main()
{
    uint row = group_id();
    if (row >= p.i_ne0 * p.i_ne1 * p.i_ne2) return;
    uint i10 = row % p.i_ne0, i11 = (row / p.i_ne0) % p.i_ne1, i12 = row / (p.i_ne0 * p.i_ne1);
    int id = int(s1.d[(p.i_off + i10 * p.i_nb0 + i11 * p.i_nb1 + i12 * p.i_nb2) >> 2]);
    bool valid = id >= 0 && uint(id) < p.n_rows;
    if (valid && (uint(id) < p.row_lo || uint(id) >= p.row_lo + p.row_cnt)) return;
    if (!valid && p.row_lo != 0u) return;
    uint ab = p.a_off + (valid ? (uint(id) - p.row_lo) * p.a_nb1 : 0u) + (i11 % p.a_ne2) * p.a_nb2 + (i12 % p.a_ne3) * p.a_nb3;
    uint db = p.d_off + i10 * p.d_nb1 + i11 * p.d_nb2 + i12 * p.d_nb3;
    for (uint k = gl_LocalInvocationID.x * 8u; k < p.K; k += WG * 8u) {
        float v[8];
        if (valid) dq8(ab, k, p.K, p.a_nb0, v);
        for (uint j = 0; j < 8u && k + j < p.K; j++) st_f32(db + (k + j) * p.d_nb0, valid ? v[j] : 0.0);
    }
}
