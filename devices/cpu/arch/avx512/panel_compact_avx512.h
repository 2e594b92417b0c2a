/*
 * panel_compact_avx512.h — entry points of panel_compact_avx512.c (compact
 * and wide panel kernels, R = 16) for the AVX-512 kernel table in
 * matmul_avx512.c. Only for files compiled with the AVX-512 flags.
 */
#ifndef HET_CPU_PANEL_COMPACT_AVX512_H
#define HET_CPU_PANEL_COMPACT_AVX512_H

#include "devices/cpu/quant_dot.h"

void het_panel_q40_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                          float *out);
void het_panel_q80_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                          float *out);
void het_panel_q6c_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                          float *out);
void het_panel_q4kc_avx512(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                           float *out);

void het_panels_q40_avx512(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                           const uint8_t *const *a, int nc, float *out, size_t ldo);
void het_panels_q80_avx512(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                           const uint8_t *const *a, int nc, float *out, size_t ldo);
void het_panels_q6c_avx512(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                           const uint8_t *const *a, int nc, float *out, size_t ldo);
void het_panels_q4kc_avx512(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                            const uint8_t *const *a, int nc, float *out, size_t ldo);

void het_xexpand_q40_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst);
void het_xexpand_q80_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst);
void het_xexpand_q4kc_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0,
                             int64_t b1, void *dst);
void het_xexpand_q6c_avx512(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                            void *dst);
void het_xpanel_q4kc_avx512(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                            size_t ldo, bool accumulate);
void het_xpanel_q6c_avx512(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                           size_t ldo, bool accumulate);
void het_xpanel_q40_avx512(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                           size_t ldo, bool accumulate);
void het_xpanel_q80_avx512(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out,
                           size_t ldo, bool accumulate);

#endif /* HET_CPU_PANEL_COMPACT_AVX512_H */
