// mul_mat_pc.glsl — push constants shared by mul_mat_vec and mul_mat.
// dst[n, m, i12, i13] = sum_k src0[k, n, i12/r2, i13/r3] * src1[k, m, i12, i13]
layout(push_constant) uniform PC {
    uint K, N, M;
    uint B2, B3;     // destination batch dims (= src1's)
    uint r2, r3;     // broadcast ratios B2/ne02, B3/ne03
    uint a_nb0, a_nb1, a_nb2, a_nb3;
    uint b_nb0, b_nb1, b_nb2, b_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint a_off, b_off, d_off;
} p;
