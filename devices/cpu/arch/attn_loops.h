/*
 * attn_loops.h — the register blocks of the CPU attention's inner kernels
 * and the loops around them, shared by arch/avx2/attn_avx2.c and
 * arch/avx512/attn_avx512.c (internal). The two differ only in the vector
 * they use; include this after defining:
 *   QK_ROWS, QK_KEYS   the QK block: query rows x keys
 *   PV_ROWS            the PV block's query rows
 *   ATTN_VLEN          floats per vector (the PV block is 2 vectors wide)
 *   attn_vec           the vector type, and on it (all always inline):
 *   attn_vzero()                    zeros
 *   attn_vload(p), attn_vstore(p, v)   q and o rows (the kernels' scratch)
 *   attn_vload_kv(F16, row, d)      ATTN_VLEN elements of a K or V row (F16
 *                                   != 0: an F16 cache) from element d
 *   attn_vbcast(s, i, j)            s[i + j] in every lane (i and j apart:
 *                                   each file keeps its address arithmetic)
 *   attn_vfma(a, b, c)              a * b + c
 *   attn_scores(NK, acc, s)         the sums of acc[0..NK) (NK 1 or
 *                                   QK_KEYS) into s[0..NK)
 * F16, a compile-time constant everywhere, is 0 for F32 rows and
 * ATTN_F16(hint) for an F16 cache whose rows decode asks for ahead with
 * that hint (enum het_cpu_stream: the one the device's race chose for the
 * weights, attn_pf_once).
 * It defines qk_all and pv_all (and ATTN_QK_F16_DEF, an F16 QK entry point
 * per hint): the contracts of attention.h over any nr,
 * nk and hdp (a multiple of PV_COLS / 2), every row count a compile-time
 * constant in its instantiation so the accumulators stay in registers.
 */
#ifndef HET_CPU_ATTN_LOOPS_H
#define HET_CPU_ATTN_LOOPS_H

#include "devices/cpu/cpu_ops.h" /* enum het_cpu_stream */

#define PV_COLS (2 * ATTN_VLEN)

/* ---- QK ------------------------------------------------------------------- */

/* Scores of NR query rows against NK (1 or QK_KEYS) keys starting at row k. */
static inline __attribute__((always_inline)) void qk_block(const int F16, const int NR, const int NK, int hdp,
                                                           const float *q, const char *k, size_t ldk, float *s,
                                                           int lds)
{
    attn_vec acc[QK_ROWS][QK_KEYS];
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) acc[r][c] = attn_vzero();

    for (int d = 0; d < hdp; d += ATTN_VLEN) {
        attn_vec qv[QK_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < NR; r++) qv[r] = attn_vload(q + r * hdp + d);
#pragma GCC unroll 4
        for (int c = 0; c < NK; c++) {
            const attn_vec kv = attn_vload_kv(F16, k + c * ldk, d);
#pragma GCC unroll 4
            for (int r = 0; r < NR; r++) acc[r][c] = attn_vfma(qv[r], kv, acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < NR; r++) attn_scores(NK, acc[r], s + r * lds);
}

/* ---- PV ------------------------------------------------------------------- */

/* o[NR rows][NV vectors from column d] += s[NR rows][0..nk) * v[0..nk)[d..]. */
static inline __attribute__((always_inline)) void pv_block(const int F16, const int NR, const int NV, int nk,
                                                           int hdp, const float *s, int lds, const char *v,
                                                           size_t ldv, int d, float *o)
{
    attn_vec acc[PV_ROWS][2];
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) acc[r][c] = attn_vload(o + r * hdp + d + ATTN_VLEN * c);

    for (int j = 0; j < nk; j++) {
        attn_vec vv[2];
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) vv[c] = attn_vload_kv(F16, v + j * ldv, d + ATTN_VLEN * c);
#pragma GCC unroll 8
        for (int r = 0; r < NR; r++) {
            const attn_vec pb = attn_vbcast(s, r * lds, j);
#pragma GCC unroll 2
            for (int c = 0; c < NV; c++) acc[r][c] = attn_vfma(pb, vv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 2
        for (int c = 0; c < NV; c++) attn_vstore(o + r * hdp + d + ATTN_VLEN * c, acc[r][c]);
}

/* ---- the loops around the blocks -------------------------------------------- */

/* Decode reads F16 cache rows that come from memory (the token's weights
 * have streamed through the caches since the step before): its loops ask
 * for the row ATTN_PF_KEYS keys ahead, so the rows arrive at a steady
 * distance instead of one miss after another. Asking once cut attention
 * to 0.77-0.86x the time (Zen 4, one thread, 64-1024 keys). The hint is
 * L2's, not L1's, as for the decode matmuls' weights (panel_compact_avx512.c):
 * an L1 prefetch holds one of the core's few L1 miss buffers until the line
 * comes from memory, and the demand loads queue behind it. Zen 4, one query
 * token, 16/8 heads of 128, 28 layers' caches in turn after a 256 MB read
 * (a throwaway harness), 2 threads, 8 rounds with the variants interleaved,
 * time against 16 keys ahead into L1: 16 keys into L2 0.80x at 64 keys,
 * 0.83x at 256, 0.82x at 1024, 0.74x at 2048; 24 keys into L2 0.83x, 0.75x,
 * 0.75x, 0.69x; 32 into L2 0.89x, 0.74x, 0.73x, 0.71x; 32 into L1 1.01-
 * 1.04x. One thread: 24 into L2 0.86x at 64 keys, 0.74x at 1024. AVX2
 * (HET_CPU_ISA=avx2, QK only), 2 threads: 0.88x at 64, 0.80x at 1024.
 * Whole decode tokens, this against the former 16 keys into L1 on
 * alternate tokens of one process, each way round (128 tokens after a
 * prompt of 64, 512 and 2,048 tokens): Q4_0 0.98-0.99x the time, 0.92-0.98x,
 * 0.79-0.83x; Q4_K_M 0.99x, 0.91-0.99x, 0.74-0.85x; with AVX2 0.96-1.01x,
 * 0.97-0.99x, 0.93-0.97x.
 * The rows these two loops ask for (qk_rows' keys, AVX-512 pv_keys'
 * values) are asked for with NTA instead (attn_pf_once). With a GQA group
 * of 1-2 heads (pv_keys: 1-3) decode reads each such row once a token, and
 * like the weights' stream (panel_compact_avx512.c) it then does not push
 * the cache's other rows and the activations out of L2 and L3 on its way
 * through. With larger groups qk_all's 3-row blocks have read the keys
 * (with plain loads) before qk_rows asks for them again; only 2-head
 * groups (Qwen3-0.6B's shape) were measured. Zen 5, 2 threads, the hints
 * switched every 8 tokens in one process, Q4_0, token time NTA / L2: after
 * 0 tokens of context 0.983-0.998, 256 0.978-0.996, 1024 0.955-0.980
 * (Q4_K_M 0.978-0.982, beside two busy loops 0.961), 2048 0.961-0.981;
 * AVX2 (keys only: its PV passes read a row again) 0.986-0.993 at 1024.
 * On the Xeon VM, whose weight stream NTA halves (cpu_stream.c), NTA
 * halved these rows too: bench_attn -t 2 -r 8, 28 layers' caches, one
 * query token, cache/read 0.31-0.37 with NTA against 0.55-0.78 with T1
 * (decode attention at 4096 keys 1.59-1.74 -> 0.78-0.81 ms a layer). So
 * these rows are asked for with the hint the device's race chose for the
 * weights (attention.c picks the kernel instance; the hint is part of F16). */
#define ATTN_PF_KEYS HET_ATTN_PF_KEYS
#define ATTN_F16(hint) (1 + (int)(hint))

static inline __attribute__((always_inline)) void attn_pf_row(const char *row, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_T1);
}

static inline __attribute__((always_inline)) void attn_pf_once(const int F16, const char *row, size_t bytes)
{
    if (F16 == ATTN_F16(HET_CPU_STREAM_T1))
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_T1);
    else if (F16 == ATTN_F16(HET_CPU_STREAM_T0))
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_T0);
    else
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(row + o, _MM_HINT_NTA);
}

/* NR rows (NR < QK_ROWS: the leftover rows, or decode's 1-2) against all
 * nk keys; F16 rows are asked for ahead. */
static inline __attribute__((always_inline)) void qk_rows(const int F16, const int NR, int nk, int hdp,
                                                          const float *q, const char *k, size_t ldk, float *s,
                                                          int lds)
{
    int j = 0;
    for (; j + QK_KEYS <= nk; j += QK_KEYS) {
        if (F16)
            for (int c = 0; c < QK_KEYS; c++) attn_pf_once(F16, k + (j + ATTN_PF_KEYS + c) * ldk, (size_t)hdp * 2);
        qk_block(F16, NR, QK_KEYS, hdp, q, k + j * ldk, ldk, s + j, lds);
    }
    for (; j < nk; j++) qk_block(F16, NR, 1, hdp, q, k + j * ldk, ldk, s + j, lds);
}

/* Keys in the outer loop: each group of keys stays in L1 while all query
 * rows (a few KB of scratch) stream past it. */
static inline __attribute__((always_inline)) void qk_all(const int F16, int nr, int nk, int hdp, const float *q,
                                                         const void *kv, size_t ldk, float *s, int lds)
{
    const char *k = kv;
    const int nrb = nr - nr % QK_ROWS;
    int j = 0;
    for (; j + QK_KEYS <= nk; j += QK_KEYS)
        for (int r = 0; r < nrb; r += QK_ROWS)
            qk_block(F16, QK_ROWS, QK_KEYS, hdp, q + (size_t)r * hdp, k + j * ldk, ldk, s + (size_t)r * lds + j,
                     lds);
    for (; j < nk; j++)
        for (int r = 0; r < nrb; r += QK_ROWS)
            qk_block(F16, QK_ROWS, 1, hdp, q + (size_t)r * hdp, k + j * ldk, ldk, s + (size_t)r * lds + j, lds);
    const float *qr = q + (size_t)nrb * hdp;
    float *sr = s + (size_t)nrb * lds;
    switch (nr - nrb) {
    case 2: qk_rows(F16, 2, nk, hdp, qr, k, ldk, sr, lds); break;
    case 1: qk_rows(F16, 1, nk, hdp, qr, k, ldk, sr, lds); break;
    default: break;
    }
}

static inline __attribute__((always_inline)) void pv_rows(const int F16, const int NR, int nk, int hdp,
                                                          const float *s, int lds, const char *v, size_t ldv,
                                                          float *o)
{
    int d = 0;
    for (; d + PV_COLS <= hdp; d += PV_COLS) pv_block(F16, NR, 2, nk, hdp, s, lds, v, ldv, d, o);
    if (d < hdp) pv_block(F16, NR, 1, nk, hdp, s, lds, v, ldv, d, o);
}

static inline __attribute__((always_inline)) void pv_all(const int F16, int nr, int nk, int hdp, const float *s,
                                                         int lds, const void *vv, size_t ldv, float *o)
{
    const char *v = vv;
    int r = 0;
    for (; r + PV_ROWS <= nr; r += PV_ROWS)
        pv_rows(F16, PV_ROWS, nk, hdp, s + (size_t)r * lds, lds, v, ldv, o + (size_t)r * hdp);
    const float *sr = s + (size_t)r * lds;
    float *orow = o + (size_t)r * hdp;
    switch (nr - r) {
    case 5: pv_rows(F16, 5, nk, hdp, sr, lds, v, ldv, orow); break;
    case 4: pv_rows(F16, 4, nk, hdp, sr, lds, v, ldv, orow); break;
    case 3: pv_rows(F16, 3, nk, hdp, sr, lds, v, ldv, orow); break;
    case 2: pv_rows(F16, 2, nk, hdp, sr, lds, v, ldv, orow); break;
    case 1: pv_rows(F16, 1, nk, hdp, sr, lds, v, ldv, orow); break;
    default: break;
    }
}

/* An F16 cache's QK entry point (attention.h's contract) asking ahead with
 * one hint: each file instantiates one per hint. */
#define ATTN_QK_F16_DEF(name, hint)                                                                            \
    void name(int nr, int nk, int hdp, const float *q, const void *k, size_t ldk, float *s, int lds)          \
    {                                                                                                          \
        qk_all(ATTN_F16(hint), nr, nk, hdp, q, k, ldk, s, lds);                                                \
    }

#endif /* HET_CPU_ATTN_LOOPS_H */
