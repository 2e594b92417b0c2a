/*
 * matmul_avx512.c — the kernel tables of the two AVX-512 levels of the CPU
 * matrix multiplication: avx512 (F/BW/VL/DQ, integer sums by vpmaddubsw +
 * vpmaddwd) and avx512vnni (the same kernels with vpdpbusd). The kernels
 * are in panel_compact_avx512.c, each instantiated once per level; the
 * device picks the level once, from cpuid, and HET_CPU_ISA=avx512 selects
 * the first on a VNNI machine, so both run in the tests there.
 *
 * Panels of 16 rows (one zmm holds k = 4g..4g+3 of 16 rows): compact ones
 * for q4_0, q8_0, q6_K and q4_K (decode, and expanded to wide ones for
 * prefill), nibble panels for q4_1. A NULL entry is taken from the level
 * below (matmul.c): GEMV, quantisation, float weights and q5 come from AVX2.
 */
#include "devices/cpu/arch/avx512/panel_compact_avx512.h"
#include "devices/cpu/quant_dot.h"

/* lv: avx512 or avx512vnni */
#define HET_AVX512_TABLE(lv)                                                                                  \
    {                                                                                                         \
        .panel = {                                                                                            \
            [HET_PANEL_U4N] = het_panel_u4n_##lv,                                                             \
            [HET_PANEL_Q40] = het_panel_q40_##lv, [HET_PANEL_Q80] = het_panel_q80_##lv,                       \
            [HET_PANEL_Q6C] = het_panel_q6c_##lv, [HET_PANEL_Q4KC] = het_panel_q4kc_##lv,                     \
        },                                                                                                    \
        .panels = {                                                                                           \
            [HET_PANEL_Q40] = het_panels_q40_##lv, [HET_PANEL_Q80] = het_panels_q80_##lv,                     \
            [HET_PANEL_Q6C] = het_panels_q6c_##lv, [HET_PANEL_Q4KC] = het_panels_q4kc_##lv,                   \
        },                                                                                                    \
        .panel_rows = 16,                                                                                     \
        .xexpand = {                                                                                          \
            [HET_PANEL_Q40] = het_xexpand_q40_##lv, [HET_PANEL_Q80] = het_xexpand_q80_##lv,                   \
            [HET_PANEL_Q6C] = het_xexpand_q6c_##lv, [HET_PANEL_Q4KC] = het_xexpand_q4kc_##lv,                 \
        },                                                                                                    \
        .xpanel = {                                                                                           \
            [HET_PANEL_Q40] = het_xpanel_q40_##lv, [HET_PANEL_Q80] = het_xpanel_q80_##lv,                     \
            [HET_PANEL_Q6C] = het_xpanel_q6c_##lv, [HET_PANEL_Q4KC] = het_xpanel_q4kc_##lv,                   \
        },                                                                                                    \
        .xcols = 4,                                                                                           \
    }

const struct het_mm_kernels het_mm_kernels_avx512 = HET_AVX512_TABLE(avx512);
const struct het_mm_kernels het_mm_kernels_avx512vnni = HET_AVX512_TABLE(avx512vnni);
