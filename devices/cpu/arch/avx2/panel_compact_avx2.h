/*
 * panel_compact_avx2.h — entry points of panel_compact_avx2.c (compact,
 * wide and U4N panel kernels, R = 8) for the AVX2 kernel table in
 * matmul_avx2.c.
 * Only for files compiled with the AVX2 flags (devices/cpu/arch/avx2/).
 */
#ifndef HET_CPU_PANEL_COMPACT_AVX2_H
#define HET_CPU_PANEL_COMPACT_AVX2_H

#include "devices/cpu/quant_dot.h"

/* Activation blocks the U5 and U4N panel kernels ask for this far ahead. */
#define HET_AVX2_PF_ACT_BLOCKS 3

void het_panel_u4n_avx2(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                        float *out);

void het_panel_q40_avx2(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                        float *out);
void het_panel_q80_avx2(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                        float *out);
void het_panel_q6c_avx2(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                        float *out);

void het_panel_q4kc_avx2(const struct het_panel_layout *l, const void *panel, const uint8_t *const *a, int nc,
                         float *out);

void het_panels_q40_avx2(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                         const uint8_t *const *a, int nc, float *out, size_t ldo,
                         enum het_cpu_stream stream);
void het_panels_q80_avx2(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                         const uint8_t *const *a, int nc, float *out, size_t ldo,
                         enum het_cpu_stream stream);
void het_panels_q6c_avx2(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                         const uint8_t *const *a, int nc, float *out, size_t ldo,
                         enum het_cpu_stream stream);

void het_panels_q4kc_avx2(const struct het_panel_layout *l, const void *panel, size_t stride, int64_t np,
                          const uint8_t *const *a, int nc, float *out, size_t ldo,
                         enum het_cpu_stream stream);

void het_xexpand_q40_avx2(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                          void *dst);
void het_xexpand_q80_avx2(const struct het_panel_layout *l, const void *p0, const void *p1, int64_t b0, int64_t b1,
                          void *dst);
void het_xpanel_q40_avx2(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out, size_t ldo,
                         bool accumulate);
void het_xpanel_q80_avx2(int R, int64_t nb, const void *xp, const uint8_t *const *a, int nc, float *out, size_t ldo,
                         bool accumulate);

#endif /* HET_CPU_PANEL_COMPACT_AVX2_H */
