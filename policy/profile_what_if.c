/*
 * profile_what_if.c — what-if machines: profiles of the hardware het is
 * for but that is not here, so `hetrun plan --profile ryzen-ai-7040` shows
 * how a model would split on it and why. Nothing here is measured: every
 * profile is labelled "what-if (unmeasured)" and names where each figure
 * comes from. Calibration on the real machine replaces all of it.
 *
 * ryzen-ai-7040 (e.g. Ryzen 7 7840U, "Phoenix"):
 *   memory   DDR5-5600 on a 128-bit bus (the 7840U takes DDR5-5600 or
 *            LPDDR5x-7500, https://cputronic.com/cpu/amd-ryzen-7-7840u):
 *            5600 MT/s x 16 bytes = 89.6 GB/s peak, shared by all three.
 *   cpu      8 Zen 4 cores, 3.3 GHz base (same page). Zen 4 runs AVX-512 on
 *            its two 256-bit FMA pipes ("double-pumping", Zen 4 teardown,
 *            http://numberworld.org/blogs/2024_8_7_zen5_avx512_teardown),
 *            so 2 x 8 FP32 FMAs x 2 flops = 32 flops a cycle a core:
 *            8 x 32 x 3.3 GHz = 845 GFLOP/s. Op and split overheads are
 *            het's CPU defaults (1 us, 3 us), not measured anywhere.
 *   igpu     Radeon 780M: RDNA3, 12 CUs, 768 shaders at 2.7 GHz, 8.294 TFLOPS
 *            FP32 with dual issue (https://fpsbench.com/compare/gpu/
 *            amd-radeon-760m-vs-amd-radeon-780m). Op and submit overheads are
 *            het's iGPU defaults (8 us, 60 us), not measured anywhere.
 *   npu      XDNA1: het's NPU cost model at its XDNA1 figures, which are the
 *            seeds' measurements on such a machine (GEMV 0.15 ms + bytes /
 *            38.5 GB/s; ~2 ms to switch compiled kernels) and ~2 TOP/s int8
 *            sustained (devices/npu/npu_profile.c). Synchronous and lossy.
 *   hand-offs: het's default (20 us, no copy: one memory).
 */
#include "policy/profile_impl.h"

#include "het/npu.h"

#include <stdio.h>
#include <string.h>

struct what_if_device {
    const char             *name;
    const char             *desc;
    enum het_device_kind    kind;
    struct het_device_caps  caps;
    struct het_roofline     roofline;   /* unless npu_model                     */
    bool                    npu_model;  /* het's NPU cost model at npu_gen      */
    enum het_npu_gen        npu_gen;
};

struct what_if_machine {
    const char                 *name;
    const char                 *desc;
    struct what_if_device       dev[3];
    int                         n;
};

static const struct what_if_machine machines[] = {
    { .name = "ryzen-ai-7040",
      .desc = "AMD Ryzen AI 7040 (Ryzen 7 7840U): Zen 4 CPU, Radeon 780M iGPU, XDNA1 NPU, DDR5-5600",
      .n = 3,
      .dev = {
          { .name = "zen4", .desc = "8 Zen 4 cores at 3.3 GHz (what-if)", .kind = HET_DEVICE_CPU,
            .caps = { .host_mapped = true, .shares_cpu_cores = true, .repacks_weights = true },
            .roofline = { .gbps = 89.6, .gflops = 845, .t0_us = 1.0, .split_us = 3,
                          .source = "DDR5-5600 128-bit 89.6 GB/s; 8 cores x 32 FP32 flops/cycle x 3.3 GHz" } },
          { .name = "radeon780m", .desc = "Radeon 780M, 12 RDNA3 CUs at 2.7 GHz (what-if)",
            .kind = HET_DEVICE_VULKAN, .caps = { .async = true },
            .roofline = { .gbps = 89.6, .gflops = 8294, .t0_us = 8.0, .split_us = 60,
                          .source = "DDR5-5600 128-bit 89.6 GB/s; 8.294 TFLOPS FP32 (768 shaders, 2.7 GHz, "
                                    "dual issue)" } },
          { .name = "xdna1", .desc = "XDNA1 NPU (what-if)", .kind = HET_DEVICE_NPU,
            .caps = { .lossy = true, .repacks_weights = true }, .npu_model = true, .npu_gen = HET_NPU_XDNA1 },
      } },
};

static het_profile *what_if_profile(const struct what_if_machine *m, const struct what_if_device *d, het_error *err)
{
    het_profile *p;
    char label[256];
    if (d->npu_model) { /* the one NPU cost model, at the generation's figures */
        struct het_npu_profile np;
        het_npu_profile_default(d->npu_gen, &np);
        p = het_profile_from_npu(&np, d->name, d->desc, err);
        if (!p) return NULL;
        snprintf(label, sizeof label, "what-if %s (unmeasured): NPU cost model, %.0f us a dispatch, %.1f GB/s, "
                 "%.0f GOP/s int8, %.0f us a kernel switch (seeds)", m->name, np.dispatch_us, np.weight_gbps,
                 np.int8_gops, np.switch_us);
    } else {
        p = het_profile_from_roofline(d->name, d->desc, d->kind, &d->caps, &d->roofline);
        if (!p) {
            het_error_set(err, HET_ERR_NOMEM, "profile: out of memory");
            return NULL;
        }
        snprintf(label, sizeof label, "what-if %s (unmeasured): %s", m->name, d->roofline.source);
    }
    het_profile_set_caps(p, &d->caps);
    het_profile_set_label(p, false, label);
    return p;
}

const char *het_profile_what_if_desc(const char *machine)
{
    for (size_t i = 0; i < sizeof machines / sizeof machines[0]; i++)
        if (!strcmp(machines[i].name, machine)) return machines[i].desc;
    return NULL;
}

const char *het_profile_what_if_name(int i)
{
    return i >= 0 && i < (int)(sizeof machines / sizeof machines[0]) ? machines[i].name : NULL;
}

enum het_status het_profile_what_if(const char *machine, het_profile **out, int max, int *n, het_error *err)
{
    *n = 0;
    const struct what_if_machine *m = NULL;
    for (size_t i = 0; i < sizeof machines / sizeof machines[0]; i++)
        if (!strcmp(machines[i].name, machine)) m = &machines[i];
    if (!m) return het_error_set(err, HET_ERR_INVALID, "no what-if machine '%s'", machine);
    if (m->n > max) return het_error_set(err, HET_ERR_INVALID, "what-if %s has %d devices, room for %d", machine, m->n,
                                         max);
    for (int i = 0; i < m->n; i++) {
        out[i] = what_if_profile(m, &m->dev[i], err);
        if (!out[i]) {
            while (i-- > 0) het_profile_free(out[i]);
            return err && err->status != HET_OK ? err->status : HET_ERR_NOMEM;
        }
    }
    *n = m->n;
    return HET_OK;
}
