/*
 * npu_profile.c — the NPU's default cost-model parameters and the matmul
 * time they predict, so a planner can place work on an NPU (real or
 * emulated) before anything has been measured on this machine.
 *
 * The figures are the design notes' measurements on other machines:
 * XDNA1 GEMV T = 0.15 ms + bytes / 38.5 GB/s (standalone DMA benchmark),
 * ~2 ms to switch between two compiled kernels, int8 GEMM around 2 TOPS
 * sustained; XDNA2 figures are scaled from the same notes (decode weight
 * streaming ~60 GB/s, launch ~40 us). They are defaults, flagged emulated,
 * to be replaced by calibration. This file is het's only NPU cost model:
 * the planner's NPU profile (het_profile_from_npu) samples this formula.
 */
#include "het/npu.h"

#include "het/profile.h"

#include <stdio.h>
#include <string.h>

void het_npu_profile_default(enum het_npu_gen gen, struct het_npu_profile *out)
{
    memset(out, 0, sizeof *out);
    out->gen = gen == HET_NPU_XDNA2 ? HET_NPU_XDNA2 : HET_NPU_XDNA1;
    out->emulated = true;
    out->m_tile_gemv = 1;
    out->m_tile_gemm = 32;
    out->switch_us = 2000.0;
    if (out->gen == HET_NPU_XDNA2) {
        out->dispatch_us = 40.0;
        out->weight_gbps = 60.0;
        out->io_gbps = 60.0;
        out->int8_gops = 8000.0;
    } else {
        out->dispatch_us = 150.0;
        out->weight_gbps = 38.5;
        out->io_gbps = 38.5;
        out->int8_gops = 2000.0;
    }
}

/* Bits per weight of the NPU layout for a source type (values + scale pair
 * + bias pair where the source has a minimum), as npu_layout.c lays it out. */
static double layout_bits(enum het_type t)
{
    switch (t) {
    case HET_TYPE_Q4_0: return 4.0 + 1.0;
    case HET_TYPE_Q4_1:
    case HET_TYPE_Q4_K: return 4.0 + 2.0;
    case HET_TYPE_Q8_0: return 8.0 + 1.0;
    default:            return 16.0;
    }
}

double het_npu_profile_matmul_us(const struct het_npu_profile *p, enum het_type wtype, int64_t K, int64_t N,
                                 int64_t M)
{
    if (!p || K <= 0 || N <= 0 || M <= 0) return 0.0;
    const int64_t mt = M == 1 ? (p->m_tile_gemv > 0 ? p->m_tile_gemv : 1) : (p->m_tile_gemm > 0 ? p->m_tile_gemm : 1);
    const double mpad = (double)((M + mt - 1) / mt * mt);
    const double npad = (double)((N + 31) / 32 * 32);
    const double wbytes = (double)K * npad * layout_bits(wtype) / 8.0;
    const double iobytes = mpad * ((double)K + 4.0) + mpad * npad * 4.0;
    const double t_mem = p->weight_gbps > 0 ? wbytes / (p->weight_gbps * 1e3) : 0.0;
    const double t_mac = p->int8_gops > 0 ? 2.0 * mpad * (double)K * npad / (p->int8_gops * 1e3) : 0.0;
    const double t_io = p->io_gbps > 0 ? iobytes / (p->io_gbps * 1e3) : 0.0;
    return p->dispatch_us + (t_mem > t_mac ? t_mem : t_mac) + t_io;
}

/* The one NPU cost model as a planner profile: the formula above sampled
 * over model-class shapes and M = 1 .. 512 for each weight type the NPU
 * takes, and fitted like measured samples; the fit's error says how well the
 * planner's form follows it (M padding is what m_half absorbs). Never timed:
 * the emulated NPU's wall time is the CPU's. Synchronous (run_split waits for
 * its commands) and lossy (int8 activations). Labelled unmeasured. */
static const enum het_type npu_types[] = { HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q8_0, HET_TYPE_Q4_K };
static const int64_t npu_shapes[][2] = { { 1024, 1024 }, { 1024, 3072 }, { 3072, 1024 }, { 2048, 2048 },
                                         { 1024, 32000 } };

static enum het_status sample_type(het_profile *p, const struct het_npu_profile *np, enum het_type t, het_error *err)
{
    const struct het_type_traits *tr = het_type_get_traits(t);
    for (size_t s = 0; s < sizeof npu_shapes / sizeof npu_shapes[0]; s++)
        for (int64_t m = 1; m <= 512; m *= 2) {
            double k = (double)npu_shapes[s][0], n = (double)npu_shapes[s][1];
            struct het_profile_sample x = {
                .m = (double)m, .flops = 2.0 * k * n * (double)m,
                .bytes = k * n * (double)tr->type_size / (double)tr->blck_size + (k + n) * (double)m * 4.0,
                .us = het_npu_profile_matmul_us(np, t, npu_shapes[s][0], npu_shapes[s][1], m), .spread = 0,
            };
            enum het_status st = het_profile_add_sample(p, HET_OPCLASS_MATMUL, t, &x, err);
            if (st != HET_OK) return st;
        }
    return HET_OK;
}

het_profile *het_profile_from_npu(const struct het_npu_profile *np, const char *dev_name, const char *dev_desc,
                                  het_error *err)
{
    het_profile *p = het_profile_new(dev_name, dev_desc, HET_DEVICE_NPU, np->emulated);
    if (!p) {
        het_error_set(err, HET_ERR_NOMEM, "profile: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < sizeof npu_types / sizeof npu_types[0]; i++)
        if (sample_type(p, np, npu_types[i], err) != HET_OK) {
            het_profile_free(p);
            return NULL;
        }
    het_profile_refit(p, err);
    struct het_profile_device_costs dc = { .split_us = 0, .kernel_switch_us = np->switch_us, .async = false,
                                           .lossy = true, .shares_cpu_cores = false,
                                           .peak_gbps = np->weight_gbps, .peak_gflops = np->int8_gops };
    het_profile_set_device_costs(p, &dc);
    char label[256];
    snprintf(label, sizeof label, "unmeasured: NPU %s cost model (%s figures: %.0f us a dispatch, %.1f GB/s, "
             "%.0f GOP/s int8, %.0f us a kernel switch)", np->gen == HET_NPU_XDNA2 ? "XDNA2" : "XDNA1",
             np->emulated ? "default" : "device", np->dispatch_us, np->weight_gbps, np->int8_gops, np->switch_us);
    het_profile_set_label(p, false, label);
    return p;
}
