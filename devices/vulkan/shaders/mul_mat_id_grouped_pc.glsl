// mul_mat_id_grouped_pc.glsl — push constants of the grouped MUL_MAT_ID path
// (moe_group.comp, then mul_mat_id.comp; host: vk_encode_moe.c): experts
// src0 (K, N, E), input src1 (K, n_b, T), ids I32 (k, T) read through their
// byte strides, dst (N, k, T):
//     dst[:, s, t] = src0[:, :, ids[s, t]] x src1[:, s % n_b, t]
// The grouping pass writes, in the scratch buffer (word offsets):
//     0                 the number of column tiles
//     TILES_AT + 3*i    tile i: expert e, first pair, pair count (<= tile)
//     pairs_at + j      pair j, s + k*t, grouped by expert
// Pairs whose id lies outside [0, E) form expert E's group: NaN outputs.
layout(push_constant) uniform PC {
    uint K, N, E, k, T, n_b;
    uint a_nb0, a_nb1, a_nb2;
    uint b_nb0, b_nb1, b_nb2;
    uint d_nb0, d_nb1, d_nb2;
    uint a_off, b_off, d_off;
    uint i_off, i_nb0, i_nb1;
    uint pairs_at;
    uint tile;       // pairs per column tile: 64 (mul_mat_id.comp) or 8 (mul_mat_id_rows.comp)
} p;

#define TILES_AT 4u
