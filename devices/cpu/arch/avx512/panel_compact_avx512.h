/*
 * panel_compact_avx512.h — entry points of panel_compact_avx512.c (compact,
 * wide and U4N panel kernels, R = 16) for the two AVX-512 kernel tables in
 * matmul_avx512.c: each kernel once without VNNI (suffix _avx512) and once
 * with it (_avx512vnni). Only for files compiled with the AVX-512 flags.
 */
#ifndef HET_CPU_PANEL_COMPACT_AVX512_H
#define HET_CPU_PANEL_COMPACT_AVX512_H

#include "devices/cpu/quant_dot.h"

/* het_panel_fn, het_panels_fn, het_xexpand_fn and het_xpanel_fn of one
 * compact kind at one level */
#define HET_AVX512_COMPACT_DECLS(name)                                                                           \
    void het_panel_##name(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,  \
                          float *out);                                                                          \
    void het_panels_##name(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,       \
                           const uint8_t *const *a, int nc, float *out, size_t ldo,                             \
                           enum het_cpu_stream stream);                                                         \
    void het_xexpand_##name(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,        \
                            int64_t b1, void *dst);                                                             \
    void het_xpanel_##name(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,       \
                           size_t ldo, bool accumulate);

void het_panel_u4n_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                          float *out);
void het_panel_u4n_avx512vnni(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                              float *out);
HET_AVX512_COMPACT_DECLS(q40_avx512)
HET_AVX512_COMPACT_DECLS(q80_avx512)
HET_AVX512_COMPACT_DECLS(q6c_avx512)
HET_AVX512_COMPACT_DECLS(q4kc_avx512)
HET_AVX512_COMPACT_DECLS(q40_avx512vnni)
HET_AVX512_COMPACT_DECLS(q80_avx512vnni)
HET_AVX512_COMPACT_DECLS(q6c_avx512vnni)
HET_AVX512_COMPACT_DECLS(q4kc_avx512vnni)

#endif /* HET_CPU_PANEL_COMPACT_AVX512_H */
