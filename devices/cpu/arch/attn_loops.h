/*
 * attn_loops.h — the loops of the CPU attention's inner kernels around one
 * register block, shared by arch/avx2/attn_avx2.c and
 * arch/avx512/attn_avx512.c (internal). Include it after defining:
 *   QK_ROWS, QK_KEYS   the QK block: query rows x keys
 *   PV_ROWS, PV_COLS   the PV block: query rows x output columns (2 vectors)
 *   qk_block(F16, NR, NK, hdp, q, k, ldk, s, lds)   NR <= QK_ROWS rows x
 *                      NK (1 or QK_KEYS) keys
 *   pv_block(F16, NR, NV, nk, hdp, s, lds, v, ldv, d, o)   NR <= PV_ROWS
 *                      rows, NV (1 or 2) vectors from column d
 * It defines qk_all and pv_all: the contracts of attention.h over any nr,
 * nk and hdp (a multiple of PV_COLS / 2), every row count a compile-time
 * constant in its instantiation so the accumulators stay in registers.
 */
#ifndef HET_CPU_ATTN_LOOPS_H
#define HET_CPU_ATTN_LOOPS_H

/* NR rows (NR < QK_ROWS: the leftover rows) against all nk keys. */
static inline __attribute__((always_inline)) void qk_rows(const int F16, const int NR, int nk, int hdp,
                                                          const float *q, const char *k, size_t ldk, float *s,
                                                          int lds)
{
    int j = 0;
    for (; j + QK_KEYS <= nk; j += QK_KEYS) qk_block(F16, NR, QK_KEYS, hdp, q, k + j * ldk, ldk, s + j, lds);
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

#endif /* HET_CPU_ATTN_LOOPS_H */
