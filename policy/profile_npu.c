/*
 * profile_npu.c — a het_profile for an NPU from its cost-model parameters
 * (het/npu.h), never from timing the device: the emulated NPU runs on the
 * CPU and its wall time says nothing about the hardware it stands for.
 *
 * The NPU's own formula (dispatch + max(weight streaming, int8 MACs on M
 * padded to the tile) + activation I/O) is sampled over the model-class
 * shapes and M = 1 .. 512 for each weight type the NPU takes, and fitted
 * like measured samples; the fit's error says how well the planner's form
 * follows it (M padding is what m_half absorbs). The profile is labelled
 * unmeasured.
 */
#include "policy/profile_impl.h"

#include "het/npu.h"

#include <stdio.h>

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
    struct het_profile_device_costs dc = { .split_us = 0, .kernel_switch_us = np->switch_us, .async = true,
                                           .peak_gbps = np->weight_gbps, .peak_gflops = np->int8_gops };
    het_profile_set_device_costs(p, &dc);
    char label[256];
    snprintf(label, sizeof label, "unmeasured: NPU %s cost model (%s figures: %.0f us a dispatch, %.1f GB/s, "
             "%.0f GOP/s int8, %.0f us a kernel switch)", np->gen == HET_NPU_XDNA2 ? "XDNA2" : "XDNA1",
             np->emulated ? "default" : "device", np->dispatch_us, np->weight_gbps, np->int8_gops, np->switch_us);
    het_profile_set_label(p, false, label);
    return p;
}
