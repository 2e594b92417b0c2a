/*
 * cpu_features.c — what the processor can run, and which kernel level to use.
 *
 * Detection reads cpuid and, for the AVX families, xgetbv: an instruction set
 * is usable only when the CPU implements it AND the OS saves its registers
 * (XCR0), otherwise the first ymm/zmm instruction would fault. The chosen
 * level can be lowered (never raised) with
 * HET_CPU_ISA=scalar|avx2|avx512|avx512vnni so tests and benchmarks can
 * compare the kernel families on one machine (avx512 on a VNNI machine: the
 * AVX-512 kernels without VNNI).
 */
#include <cpuid.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"

static uint64_t het_cpu_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

void het_cpu_features_detect(struct het_cpu_features *f) {
    memset(f, 0, sizeof(*f));
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool osxsave = (c >> 27) & 1;
    const bool fma     = (c >> 12) & 1;
    const bool f16c    = (c >> 29) & 1;
    const bool avx     = (c >> 28) & 1;
    if (!osxsave || !avx) return;
    const uint64_t xcr0 = het_cpu_xcr0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6;    /* SSE + AVX state          */
    const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  /* + opmask, ZMM_Hi256, Hi16 */
    if (!os_ymm) return;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const bool avx2     = (b >> 5) & 1;
    const bool bmi2     = (b >> 8) & 1;
    const bool avx512f  = (b >> 16) & 1;
    const bool avx512dq = (b >> 17) & 1;
    const bool avx512bw = (b >> 30) & 1;
    const bool avx512vl = (b >> 31) & 1;
    const bool vnni512  = (c >> 11) & 1;
    f->avx2 = avx2 && fma && f16c && bmi2;
    f->avx512 = f->avx2 && os_zmm && avx512f && avx512dq && avx512bw && avx512vl;
    f->avx512_vnni = f->avx512 && vnni512;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f->avx_vnni = f->avx2 && ((a1 >> 4) & 1);
    f->avx512_bf16 = f->avx512 && ((a1 >> 5) & 1);
    (void)b1; (void)c1; (void)d1;
}

enum het_cpu_isa het_cpu_isa_select(const struct het_cpu_features *f) {
    enum het_cpu_isa best = HET_CPU_ISA_SCALAR;
    if (f->avx2) best = HET_CPU_ISA_AVX2;
    if (f->avx512) best = HET_CPU_ISA_AVX512;
    if (f->avx512_vnni) best = HET_CPU_ISA_AVX512VNNI;
    const char *env = getenv("HET_CPU_ISA");
    if (env && *env) {
        enum het_cpu_isa cap = best;
        for (int lv = HET_CPU_ISA_SCALAR; lv < HET_CPU_ISA_COUNT; lv++)
            if (strcmp(env, het_cpu_isa_name((enum het_cpu_isa)lv)) == 0) cap = (enum het_cpu_isa)lv;
        if (cap < best) best = cap;
    }
    return best;
}

const char *het_cpu_isa_name(enum het_cpu_isa isa) {
    switch (isa) {
    case HET_CPU_ISA_SCALAR: return "scalar";
    case HET_CPU_ISA_AVX2:   return "avx2";
    case HET_CPU_ISA_AVX512: return "avx512";
    case HET_CPU_ISA_AVX512VNNI: return "avx512vnni";
    case HET_CPU_ISA_COUNT: break;
    }
    return "unknown";
}
