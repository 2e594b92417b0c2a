/*
 * cpu_peak.c — het_cpu_measure_peak: the int8 multiply-add and F32
 * FMA rates the CPU device's threads reach with the instructions of its
 * kernel level (cpu_peak.h), so that prefill speed can be printed beside a
 * measured compute limit. Each rate is the best of seven ~20 ms runs on all
 * the device's threads at once (a busy machine only ever makes it slower).
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_peak.h"
#include "het/device.h"
#include "sched/clock.h"

#include <omp.h>

enum peak_kind { PEAK_INT8, PEAK_F32 };

static double run_kernel(enum peak_kind k, enum het_cpu_isa isa, int64_t iters,
                         uint32_t *sink)
{
    if (isa == HET_CPU_ISA_AMX && k == PEAK_INT8) return het_peak_int8_amx(iters, sink);
    if (isa >= HET_CPU_ISA_AVX512)
        return k == PEAK_INT8 ? het_peak_int8_avx512(iters, isa >= HET_CPU_ISA_AVX512VNNI, sink)
                              : het_peak_f32_avx512(iters, sink);
    return k == PEAK_INT8 ? het_peak_int8_avx2(iters, sink) : het_peak_f32_avx2(iters, sink);
}

/* ops/s of kind k on n threads at once, best of 7 runs of about 20 ms */
static double measure(enum peak_kind k, enum het_cpu_isa isa, int n)
{
    int64_t iters = 1 << 16;
    uint32_t sink = 0;
    for (;;) { /* size a run to ~20 ms on one thread */
        double t0 = het_now_us();
        run_kernel(k, isa, iters, &sink);
        double dt = (het_now_us() - t0) * 1e-6;
        if (dt > 0.02 || iters > ((int64_t)1 << 40)) break;
        iters = dt > 0.002 ? (int64_t)(iters * 0.02 / dt) : iters * 8;
    }
    double best = 0;
    for (int rep = 0; rep < 7; rep++) {
        double ops = 0, t0 = het_now_us();
#pragma omp parallel num_threads(n) reduction(+ : ops)
        {
            uint32_t s = 0; /* per thread: the kernels store their result here */
            ops += run_kernel(k, isa, iters, &s);
        }
        double dt = (het_now_us() - t0) * 1e-6;
        if (dt > 0 && ops / dt > best) best = ops / dt;
    }
    return best;
}

enum het_status het_cpu_measure_peak(int n_threads, struct het_cpu_peak *out, het_error *err)
{
    struct het_cpu_features f;
    het_cpu_features_detect(&f);
    enum het_cpu_isa isa = het_cpu_isa_select(&f);
    *out = (struct het_cpu_peak){ 0 };
    if (isa == HET_CPU_ISA_SCALAR)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "cpu: no SIMD level to measure peaks with");
    if (n_threads <= 0) n_threads = omp_get_num_procs();
    out->int8_gops = measure(PEAK_INT8, isa, n_threads) * 1e-9;
    out->f32_gflops = measure(PEAK_F32, isa, n_threads) * 1e-9;
    out->int8_instr = isa == HET_CPU_ISA_AMX          ? "tdpbssd tmm"
                      : isa == HET_CPU_ISA_AVX512VNNI ? "vpdpbusd zmm"
                      : isa == HET_CPU_ISA_AVX512 ? "vpmaddubsw zmm" : "vpmaddubsw ymm";
    out->f32_instr = isa >= HET_CPU_ISA_AVX512 ? "vfmadd zmm" : "vfmadd ymm";
    return HET_OK;
}
