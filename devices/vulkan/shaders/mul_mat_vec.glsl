// mul_mat_vec.glsl — matrix x vector(s) for decode: M <= 8 columns of src1.
// One workgroup computes ROWS consecutive output rows (and one batch):
// invocations stride over the rows 8 weights at a time, dequantising each
// group once for all M columns, then all ROWS*M partial sums are reduced in
// one pass (subgroupAdd per subgroup plus one shared-memory step, or a
// shared-memory tree). VARIANT = src0 type. ROWS must match the host's
// HET_VK_GEMV_ROWS (vk_internal.h).
// With MUL_MAT_ID defined (mul_mat_vec_id*.comp) the same kernel computes
// MUL_MAT_ID one input column per (slot, token): the batch index z is
// slot + k * token, and the weights are the expert that binding 2's ids name
// (mul_mat_id_pc.glsl).
#include "subgroup_ext.glsl"
#include "common.glsl"
#include "quant.glsl"
#ifdef MUL_MAT_ID
#include "mul_mat_id_pc.glsl"
#else
#include "mul_mat_pc.glsl"
#endif

#define MAX_COLS 8u
#define ROWS 4u
#define NACC (ROWS * MAX_COLS) // acc[m * ROWS + r]

shared float part[NACC * WG];

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint groups_n = (p.N + ROWS - 1u) / ROWS;
    uint g = group_id();
    uint n0 = (g % groups_n) * ROWS, z = g / groups_n;
    if (z >= p.B2 * p.B3) return; // whole workgroup
    uint i12 = z % p.B2, i13 = z / p.B2;
#ifdef MUL_MAT_ID
    // slot i12 of token i13 runs expert ids[i12, i13] over input column
    // i12 % n_b of that token; an id outside [0, E) yields NaN rows
    uint e = s2.d[(p.i_off + i12 * p.i_nb0 + i13 * p.i_nb1) >> 2];
    bool bad_id = e >= p.E;
    uint base = p.a_off + min(e, p.E - 1u) * p.a_nb2;
    uint xb = p.b_off + (i12 % p.n_b) * p.b_nb1 + i13 * p.b_nb2;
#else
    uint base = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    uint xb = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
#endif
    uint nacc = p.M * ROWS;

    float acc[NACC];
    [[unroll]] for (uint j = 0; j < NACC; j++) acc[j] = 0.0;
    for (uint k = tid * 8u; k < p.K; k += WG * 8u) {
        uint kn = min(8u, p.K - k);
        [[unroll]] for (uint r = 0; r < ROWS; r++) {
            if (n0 + r >= p.N) break;
            float w[8];
            dq8(base + (n0 + r) * p.a_nb1, k, p.K, p.a_nb0, w);
            [[unroll]] for (uint m = 0; m < MAX_COLS; m++) {
                if (m >= p.M) break;
                uint xo = xb + m * p.b_nb1 + k * p.b_nb0;
                float s = 0.0;
                if (kn == 8u) {
                    [[unroll]] for (uint j = 0; j < 8u; j++) s += w[j] * LD_F32(s1, xo + j * p.b_nb0);
                } else {
                    for (uint j = 0; j < kn; j++) s += w[j] * LD_F32(s1, xo + j * p.b_nb0);
                }
                acc[m * ROWS + r] += s;
            }
        }
    }

    uint nsum; // partial sums per accumulator left in `part`
#ifdef USE_SUBGROUP
    [[unroll]] for (uint j = 0; j < NACC; j++) {
        if (j >= nacc) break;
        acc[j] = subgroupAdd(acc[j]);
    }
    if (subgroupElect()) {
        [[unroll]] for (uint j = 0; j < NACC; j++) {
            if (j >= nacc) break;
            part[j * WG + gl_SubgroupID] = acc[j];
        }
    }
    barrier();
    nsum = gl_NumSubgroups;
#else
    [[unroll]] for (uint j = 0; j < NACC; j++) {
        if (j >= nacc) break;
        part[j * WG + tid] = acc[j];
    }
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (tid < s) {
            for (uint j = 0; j < nacc; j++) part[j * WG + tid] += part[j * WG + tid + s];
        }
        barrier();
    }
    nsum = 1u;
#endif
    if (tid < nacc) {
        uint m = tid / ROWS, r = tid % ROWS;
        if (n0 + r < p.N) {
            float t = 0.0;
            for (uint i = 0; i < nsum; i++) t += part[tid * WG + i];
#ifdef MUL_MAT_ID
            st_f32(p.d_off + (n0 + r) * p.d_nb0 + i12 * p.d_nb1 + i13 * p.d_nb2,
                   bad_id ? uintBitsToFloat(0x7FC00000u) : t);
#else
            st_f32(p.d_off + (n0 + r) * p.d_nb0 + m * p.d_nb1 + i12 * p.d_nb2 + i13 * p.d_nb3, t);
#endif
        }
    }
}
