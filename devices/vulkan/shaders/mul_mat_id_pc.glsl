// mul_mat_id_pc.glsl — push constants of MUL_MAT_ID (mul_mat_vec.glsl built
// with MUL_MAT_ID): experts src0 (K, N, E), input src1 (K, n_b, T), ids
// src2 I32 (k, T) read through its byte strides, dst (N, k, T):
//     dst[:, s, t] = src0[:, :, ids[s, t]] x src1[:, s % n_b, t]
// The field order up to d_off is mul_mat_pc.glsl's (M is always 1, B2 = k,
// B3 = T); E and n_b stand where mul_mat's broadcast ratios do.
layout(push_constant) uniform PC {
    uint K, N, M;
    uint B2, B3;     // k slots, T tokens
    uint E, n_b;     // experts; input columns per token (1 or k)
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint b_nb0, b_nb1, b_nb2, b_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, b_off, d_off;
    uint i_off, i_nb0, i_nb1;
} p;
