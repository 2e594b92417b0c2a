/*
 * cpu_features.c — what the processor can run, and which kernel level to use.
 *
 * Detection reads cpuid and, for the AVX families, xgetbv: an instruction set
 * is usable only when the CPU implements it AND the OS saves its registers
 * (XCR0), otherwise the first ymm/zmm instruction would fault. The chosen
 * level can be lowered (never raised) with
 * HET_CPU_ISA=scalar|avx2|avx512|avx512vnni|amx so tests and benchmarks can
 * compare the kernel families on one machine (avx512 on a VNNI machine: the
 * AVX-512 kernels without VNNI); a value that names no level is refused by
 * the device (het_cpu_isa_env_check), not run at the best level. It also says which processor this is
 * (vendor, brand, family / model / stepping, and for AMD the core design),
 * for the CPU device's description, and how large its largest cache is.
 */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "het/device.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t het_cpu_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux's leave for this process to use the AMX tile data (XFEATURE 18);
 * elsewhere no. */
static bool het_cpu_amx_request(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return false;
#endif
}

/* The level HET_CPU_ISA names: true and *lv, or false (unset, empty, or no level's name). */
static bool het_cpu_isa_from_env(enum het_cpu_isa *lv, const char **env) {
    *env = getenv("HET_CPU_ISA");
    if (!*env || !**env) return false;
    for (int i = HET_CPU_ISA_SCALAR; i < HET_CPU_ISA_COUNT; i++)
        if (strcmp(*env, het_cpu_isa_name((enum het_cpu_isa)i)) == 0) {
            *lv = (enum het_cpu_isa)i;
            return true;
        }
    return false;
}

/* Vendor, brand string and display family / model / stepping: a figure
 * means nothing without the core it was measured on, and a VM's brand
 * string ("AMD EPYC") may not say which. */
static void het_cpu_identify(struct het_cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    memcpy(f->vendor, &b, 4);
    memcpy(f->vendor + 4, &d, 4);
    memcpy(f->vendor + 8, &c, 4);
    f->vendor[12] = 0;
    if (a >= 1 && __get_cpuid(1, &a, &b, &c, &d)) {
        const unsigned base_fam = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
        f->family = base_fam == 0xf ? base_fam + ((a >> 20) & 0xff) : base_fam;
        f->model = base_fam == 0xf || base_fam == 0x6 ? base_model | (((a >> 16) & 0xf) << 4) : base_model;
        f->stepping = a & 0xf;
    }
    if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000004u) { /* clang declares it int, gcc unsigned */
        unsigned r[12];
        for (unsigned i = 0; i < 3; i++) __get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        memcpy(f->brand, r, 48);
        f->brand[48] = 0;
        /* trim the padding either side */
        size_t n = strlen(f->brand), s = 0;
        while (n > 0 && f->brand[n - 1] == ' ') f->brand[--n] = 0;
        while (f->brand[s] == ' ') s++;
        memmove(f->brand, f->brand + s, n - s + 1);
    }
}

/* AMD's family / model ranges per core design, as Linux's
 * arch/x86/kernel/cpu/amd.c assigns its ZEN1..ZEN5 flags. */
const char *het_cpu_core_name(const struct het_cpu_features *f) {
    if (strcmp(f->vendor, "AuthenticAMD") != 0) return NULL;
    const unsigned m = f->model;
    switch (f->family) {
    case 0x17:
        if (m <= 0x2f || (m >= 0x50 && m <= 0x5f)) return "Zen 1";
        if (m <= 0x4f || (m >= 0x60 && m <= 0x7f) || m == 0x90 || m == 0x91 || (m >= 0xa0 && m <= 0xaf)) return "Zen 2";
        return NULL;
    case 0x19:
        if (m <= 0x0f || (m >= 0x20 && m <= 0x5f)) return "Zen 3";
        if ((m >= 0x10 && m <= 0x1f) || (m >= 0x60 && m <= 0xaf)) return "Zen 4";
        return NULL;
    case 0x1a:
        if (m <= 0x2f || (m >= 0x40 && m <= 0x4f) || (m >= 0x60 && m <= 0x7f)) return "Zen 5";
        return NULL;
    default:
        return NULL;
    }
}

void het_cpu_identity(const struct het_cpu_features *f, char *buf, size_t size) {
    const char *core = het_cpu_core_name(f);
    snprintf(buf, size, "%s (family %xh model %xh stepping %u%s%s)", f->brand[0] ? f->brand : f->vendor[0] ? f->vendor : "unknown x86",
             f->family, f->model, f->stepping, core ? ", " : "", core ? core : "");
}

size_t het_cpu_largest_cache_bytes(void) {
    size_t largest = 0;
    for (int i = 0; i < 8; i++) {
        char path[80];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        unsigned long v = 0;
        char unit = 0;
        if (fscanf(f, "%lu%c", &v, &unit) >= 1) {
            const size_t b = v * (unit == 'K' ? 1024ul : unit == 'M' ? 1024ul * 1024 : unit == 'G' ? 1ul << 30 : 1);
            if (b > largest) largest = b;
        }
        fclose(f);
    }
    return largest;
}

void het_cpu_features_detect(struct het_cpu_features *f) {
    memset(f, 0, sizeof(*f));
    het_cpu_identify(f);
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
    /* AMX: tile and int8 units (leaf 7 EDX bits 24, 25), the tile state in
     * XCR0 (bits 17, 18), and Linux's leave to use it: the tile data state
     * is off for a process until it asks (arch_prctl ARCH_REQ_XCOMP_PERM,
     * which grants it to every thread of the process, and may be asked
     * again); a VM that does not pass the state through says no here. The
     * grant changes the process (Linux then holds every alternate signal
     * stack to the larger state's size), so a process whose HET_CPU_ISA
     * caps the level below amx does not ask, and has no amx. */
    const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
    enum het_cpu_isa cap;
    const char *env;
    const bool capped = het_cpu_isa_from_env(&cap, &env) && cap < HET_CPU_ISA_AMX;
    f->amx_int8 = f->avx512_vnni && amx_tile && amx_int8 && (xcr0 & 0x60000) == 0x60000 && !capped &&
                  het_cpu_amx_request();
}

enum het_cpu_isa het_cpu_isa_select(const struct het_cpu_features *f) {
    enum het_cpu_isa best = HET_CPU_ISA_SCALAR, cap;
    if (f->avx2) best = HET_CPU_ISA_AVX2;
    if (f->avx512) best = HET_CPU_ISA_AVX512;
    if (f->avx512_vnni) best = HET_CPU_ISA_AVX512VNNI;
    if (f->amx_int8) best = HET_CPU_ISA_AMX;
    const char *env;
    if (het_cpu_isa_from_env(&cap, &env) && cap < best) best = cap;
    return best;
}

enum het_status het_cpu_isa_env_check(het_error *err) {
    enum het_cpu_isa lv;
    const char *env;
    if (het_cpu_isa_from_env(&lv, &env) || !env || !*env) return HET_OK;
    return het_error_set(err, HET_ERR_INVALID, "cpu: HET_CPU_ISA='%s': expected scalar, avx2, avx512, avx512vnni or amx",
                         env);
}

const char *het_cpu_isa_name(enum het_cpu_isa isa) {
    switch (isa) {
    case HET_CPU_ISA_SCALAR: return "scalar";
    case HET_CPU_ISA_AVX2:   return "avx2";
    case HET_CPU_ISA_AVX512: return "avx512";
    case HET_CPU_ISA_AVX512VNNI: return "avx512vnni";
    case HET_CPU_ISA_AMX: return "amx";
    case HET_CPU_ISA_COUNT: break;
    }
    return "unknown";
}
