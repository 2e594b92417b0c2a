/*
 * test_cpu_peak.c — the loops that measure the CPU's arithmetic limits
 * (devices/cpu/arch/<isa>/peak_<isa>.c) run at every ISA level this machine
 * can run, and each computes what its instructions should: the accumulated
 * sums are predicted here in plain integer or float arithmetic, and the
 * reported operation count must match the loop's shape. The first AVX-512
 * run of these loops overflowed a signed sink (UBSan caught it in CI), so
 * this test also runs under the sanitizers.
 *
 * Then het_cpu_measure_peak is run with HET_CPU_ISA capped at each level and
 * must report positive, finite figures naming that level's instructions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_peak.h"
#include "het/device.h"
#include "testutil.h"

#define ITERS 1000

/* Sum over the 8 chains j = 1..8 of lane 0 of a 32-bit add of 16-bit lanes
 * that each accumulated iters * 2 * w_j * a (vpmaddubsw + vpaddw, wrapping
 * at 16 bits): each 32-bit lane holds two equal 16-bit lanes. */
static uint32_t expect_maddubs(int64_t iters, int a)
{
    uint32_t t = 0;
    for (uint32_t j = 1; j <= 8; j++) {
        const uint16_t v = (uint16_t)((uint64_t)iters * 2u * j * (uint32_t)a);
        t += (uint32_t)v | ((uint32_t)v << 16);
    }
    return t;
}

/* vpdpbusd: each 32-bit lane gains 4 * w_j * a per iteration. */
static uint32_t expect_dpbusd(int64_t iters, int a)
{
    uint32_t t = 0;
    for (uint32_t j = 1; j <= 8; j++) t += (uint32_t)((uint64_t)iters * 4u * j * (uint32_t)a);
    return t;
}

/* Twelve F32 chains c_j = j + iters * 1e-7 (float FMAs), summed, truncated. */
static uint32_t expect_f32(int64_t iters)
{
    float c[12], t;
    for (int j = 0; j < 12; j++) {
        c[j] = (float)j;
        for (int64_t i = 0; i < iters; i++) c[j] = fmaf(1.0f, 1e-7f, c[j]);
    }
    t = c[0];
    for (int j = 1; j < 12; j++) t += c[j];
    return (uint32_t)(int32_t)t;
}

static void check_loops(const struct het_cpu_features *f)
{
    uint32_t s;
    double ops;
    if (f->avx2) {
        /* the AVX2 int8 loop multiplies a zero register by all-ones bytes */
        s = 7;
        ops = het_peak_int8_avx2(ITERS, &s);
        CHECK(ops == (double)ITERS * 8 * 32 * 2, "avx2 int8 ops %.0f", ops);
        CHECK(s == 7, "avx2 int8 sink %u, want 7", s);
        s = 0;
        ops = het_peak_f32_avx2(ITERS, &s);
        CHECK(ops == (double)ITERS * 12 * 8 * 2, "avx2 f32 ops %.0f", ops);
        CHECK(s == expect_f32(ITERS), "avx2 f32 sink %u, want %u", s, expect_f32(ITERS));
    }
    if (f->avx512) {
        /* vpmaddubsw on zmm runs on every AVX-512 machine, VNNI or not */
        s = 0;
        ops = het_peak_int8_avx512(ITERS, false, &s);
        CHECK(ops == (double)ITERS * 8 * 64 * 2, "avx512 int8 ops %.0f", ops);
        CHECK(s == expect_maddubs(ITERS, 5), "avx512 vpmaddubsw sink %u, want %u", s, expect_maddubs(ITERS, 5));
        /* large enough that the 32-bit lanes wrap: unsigned in C too */
        s = 0;
        het_peak_int8_avx512((int64_t)1 << 25, false, &s);
        CHECK(s == expect_maddubs((int64_t)1 << 25, 5), "avx512 vpmaddubsw long sink %u", s);
        if (f->avx512_vnni) {
            s = 0;
            ops = het_peak_int8_avx512(ITERS, true, &s);
            CHECK(ops == (double)ITERS * 8 * 64 * 2, "avx512 vnni ops %.0f", ops);
            CHECK(s == expect_dpbusd(ITERS, 5), "avx512 vpdpbusd sink %u, want %u", s, expect_dpbusd(ITERS, 5));
            s = 0;
            het_peak_int8_avx512((int64_t)1 << 25, true, &s);
            CHECK(s == expect_dpbusd((int64_t)1 << 25, 5), "avx512 vpdpbusd long sink %u", s);
        }
        if (f->amx_int8) {
            /* C[0][0] of tdpbssd with A = B = bytes j % 7 - 3 (16 x 64),
             * added up iters times, wrapping as the i32 lane does */
            uint32_t c00 = 0;
            for (int k4 = 0; k4 < 16; k4++)
                for (int i = 0; i < 4; i++) c00 += (uint32_t)(((4 * k4 + i) % 7 - 3) * ((64 * k4 + i) % 7 - 3));
            s = 0;
            ops = het_peak_int8_amx(ITERS, &s);
            CHECK(ops == (double)ITERS * 4 * 16 * 16 * 64 * 2, "amx int8 ops %.0f", ops);
            CHECK(s == c00 * (uint32_t)ITERS, "amx tdpbssd sink %u, want %u", s, c00 * (uint32_t)ITERS);
        }
        s = 0;
        ops = het_peak_f32_avx512(ITERS, &s);
        CHECK(ops == (double)ITERS * 12 * 16 * 2, "avx512 f32 ops %.0f", ops);
        CHECK(s == expect_f32(ITERS), "avx512 f32 sink %u, want %u", s, expect_f32(ITERS));
    }
}

static void check_measure(enum het_cpu_isa isa)
{
    setenv("HET_CPU_ISA", het_cpu_isa_name(isa), 1);
    struct het_cpu_peak pk;
    het_error err = { 0 };
    enum het_status st = het_cpu_measure_peak(1, &pk, &err);
    if (isa == HET_CPU_ISA_SCALAR) {
        CHECK(st == HET_ERR_UNSUPPORTED, "scalar level: status %d, want unsupported", (int)st);
        return;
    }
    CHECK(st == HET_OK, "%s: %s", het_cpu_isa_name(isa), err.msg);
    if (st != HET_OK) return;
    CHECK(isfinite(pk.int8_gops) && pk.int8_gops > 0, "%s int8 peak %g", het_cpu_isa_name(isa), pk.int8_gops);
    CHECK(isfinite(pk.f32_gflops) && pk.f32_gflops > 0, "%s f32 peak %g", het_cpu_isa_name(isa), pk.f32_gflops);
    const char *want_int8 = isa == HET_CPU_ISA_AMX          ? "tdpbssd tmm"
                            : isa == HET_CPU_ISA_AVX512VNNI ? "vpdpbusd zmm"
                            : isa == HET_CPU_ISA_AVX512   ? "vpmaddubsw zmm"
                                                          : "vpmaddubsw ymm";
    CHECK(strcmp(pk.int8_instr, want_int8) == 0, "%s measured with %s", het_cpu_isa_name(isa), pk.int8_instr);
    fprintf(stderr, "%s: int8 %.1f GOP/s (%s), f32 %.1f GFLOP/s (%s), one thread\n", het_cpu_isa_name(isa),
            pk.int8_gops, pk.int8_instr, pk.f32_gflops, pk.f32_instr);
}

int main(void)
{
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    const enum het_cpu_isa best = het_cpu_isa_select(&f);
    fprintf(stderr, "cpu: avx2=%d avx512=%d avx512-vnni=%d amx-int8=%d; peak loops up to %s\n", f.avx2, f.avx512,
            f.avx512_vnni, f.amx_int8, het_cpu_isa_name(best));
    check_loops(&f);
    for (int lv = HET_CPU_ISA_SCALAR; lv <= (int)best; lv++) check_measure((enum het_cpu_isa)lv);
    if (best == HET_CPU_ISA_SCALAR) het_test_skip("no SIMD level on this machine");
    return het_test_finish();
}
