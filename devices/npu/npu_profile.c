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
 * to be replaced by calibration.
 */
#include "het/npu.h"

#include <math.h>
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

/* Bits per weight of the GGUF source (what het_op_cost counts). */
static double gguf_bits(enum het_type t)
{
    const struct het_type_traits *tr = het_type_get_traits(t);
    return 8.0 * (double)tr->type_size / (double)tr->blck_size;
}

het_profile *het_npu_profile_build(const het_device *dev, het_error *err)
{
    const struct het_npu_profile *p = het_npu_get_profile(dev);
    if (!p) {
        het_error_set(err, HET_ERR_INVALID, "npu: not an NPU device");
        return NULL;
    }
    het_profile *hp = het_profile_new_for_device(dev);
    if (!hp) {
        het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
        return NULL;
    }
    const struct het_profile_device_costs dc = { .split_us = 0.0, .kernel_switch_us = p->switch_us, .async = false,
                                                 .peak_gbps = p->weight_gbps, .peak_gflops = p->int8_gops };
    het_profile_set_device_costs(hp, &dc);
    static const enum het_type types[] = { HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q8_0, HET_TYPE_Q4_K };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        /* the NPU streams its own layout: express that rate in GGUF bytes */
        const struct het_cost_fit f = { .t0_us = p->dispatch_us,
                                        .gbps = p->weight_gbps * gguf_bits(types[i]) / layout_bits(types[i]),
                                        .gflops = p->int8_gops, .m_half = p->m_tile_gemm / 2.0, .error = NAN };
        if (het_profile_set_fit(hp, HET_OPCLASS_MATMUL, types[i], &f, err) != HET_OK) {
            het_profile_free(hp);
            return NULL;
        }
    }
    char label[256];
    snprintf(label, sizeof label, "unmeasured default (NPU %s figures from the design notes: %.0f us + bytes/%.1f GB/s, "
             "%.0f us a kernel switch)%s", p->gen == HET_NPU_XDNA2 ? "XDNA2" : "XDNA1", p->dispatch_us, p->weight_gbps,
             p->switch_us, het_device_is_emulated(dev) ? ", emulated device" : "");
    het_profile_set_label(hp, false, label);
    return hp;
}
