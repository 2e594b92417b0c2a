/*
 * attention.h — inner kernels of the CPU fused attention (internal).
 *
 * attention.c runs the flash-attention loop (tiles of query rows against
 * blocks of keys, online softmax); these kernels do the work inside one
 * (tile, key block) step, with portable versions in attention.c,
 * AVX2/FMA/F16C ones in arch/avx2/attn_avx2.c and AVX-512 QK and PV in
 * arch/avx512/attn_avx512.c.
 *
 * Layouts: q, o are F32 scratch rows of hdp floats (hdp % 8 == 0, 32-byte
 * aligned, zero past head_dim); s holds nr rows of scores, lds floats apart.
 * Key and value row j sits at k + j * ldk bytes (v + j * ldv): either F32
 * scratch converted by attention.c (ldk = hdp * 4) or, when the cache rows
 * are dense and head_dim % 8 == 0, the cache itself in F16 or F32.
 */
#ifndef HET_CPU_ATTENTION_H
#define HET_CPU_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

/* Decode's kernels ask for each F16 cache row this many keys ahead of the
 * one they read (arch/attn_loops.h says why and how far); attention.c asks
 * for a tile's first rows of K and V, which no earlier row asked for. The
 * F16 kernels come one per hint they ask with (plain: NTA; _t0, _t1): the
 * one the device's stream race chose (het_compute_params.stream). */
#define HET_ATTN_PF_KEYS 24

/* s[r*lds + j] = dot(q[r*hdp ..], row j of k) for r < nr, j < nk. */
typedef void (*het_attn_qk_fn)(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s,
                               int lds);
/* o[r*hdp + d] += sum_j s[r*lds + j] * (row j of v)[d] for r < nr, d < hdp, j < nk. */
typedef void (*het_attn_pv_fn)(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv,
                               float *o);
/* Online-softmax step over one block of nk scores per row. Row r may see its
 * first valid[r] keys (<= 0: none): they become exp(s - m_new), the others 0;
 * m[r] becomes m_new = max(m[r], max of the valid scores), l[r] is rescaled
 * and grows by the new sum, and o's row r is rescaled by exp(m_old - m_new). */
typedef void (*het_attn_softmax_fn)(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l,
                                    float *o, int hdp);

/* Prefill tiles with AVX-512 (attention.c, ATTN_T_MIN_ROWS query rows and
 * more; hdp % 16 == 0): the queries, scaled, and the scores are kept
 * transposed, ldt floats per row of qt (qt[d * ldt + r]) and of st
 * (st[j * ldt + r]), so the QK product is an outer product (a key element
 * broadcast times 16 rows of queries) with no horizontal sums, and the
 * softmax works on 16 rows at a time. Key and value blocks are F32 rows of
 * hdp floats (kf, vf), converted once per block for all the tile's rows.
 *  - transpose: qt from the rows of q (nr x hdp); rows past nr, up to a
 *    multiple of 16, are zero.
 *  - qk: st[j][r] = dot(row r, kf row j) for j < nk8 (a multiple of 8; kf
 *    rows up to it are readable), r < 16 * nrv.
 *  - softmax: the online-softmax step of het_attn_softmax_fn on st.
 *  - pv: o[r][d] += sum_j st[j][r] * vf[j][d], o row-major (nr x hdp). */
void het_attn_t_transpose_avx512(int nr, int hdp, const float *q, float *qt, int ldt);
void het_attn_t_qk_avx512(int nrv, int nk8, int hdp, const float *qt, int ldt, const float *kf, float *st);
void het_attn_t_softmax_avx512(int nr, int nk, float *st, int ldt, const int *valid, float *m, float *l, float *o,
                               int hdp);
void het_attn_t_pv_avx512(int nr, int nk, int hdp, const float *st, int ldt, const float *vf, float *o);

void het_attn_qk_f32_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_t0_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_t1_avx2(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_pv_f32_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
void het_attn_pv_f16_avx2(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
/* AVX-512 (attn_avx512.c): hdp % 16 == 0 */
void het_attn_qk_f32_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_t0_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_qk_f16_t1_avx512(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds);
void het_attn_pv_f32_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
void het_attn_pv_f16_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
void het_attn_pv_f16_t0_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
void het_attn_pv_f16_t1_avx512(int nr, int nk, int hdp, const float *s, int lds, const void *v, size_t ldv, float *o);
void het_attn_softmax_avx2(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l, float *o,
                           int hdp);
void het_attn_softmax_avx512(int nr, int nk, float *s, int lds, const int *valid, float *m, float *l, float *o,
                             int hdp);

#endif /* HET_CPU_ATTENTION_H */
