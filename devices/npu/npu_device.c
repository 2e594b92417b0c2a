/*
 * npu_device.c — the NPU as a het device: the vtable (supports_op,
 * register_memory, prepare_weights, run_split), construction in emulated
 * or hardware mode, and the public functions of het/npu.h.
 *
 * Both modes share everything up to the kernel call (repacking, the cache,
 * activation quantisation, padding, the staging ring); only where the
 * kernel runs differs (npu_emul.c on the CPU, npu_hw.c on amdxdna).
 */
#include "devices/npu/npu_internal.h"

#include "het/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const struct het_device_i npu_iface;

static struct npu_ctx *ctx_of(const het_device *dev)
{
    if (!dev || dev->kind != HET_DEVICE_NPU || dev->iface.run_split != npu_iface.run_split) return NULL;
    return dev->context;
}

/* ---- vtable ------------------------------------------------------------------- */

static bool npu_supports_op(het_device *dev, const struct het_tensor *node)
{
    return npu_node_ok(dev->context, node);
}

static enum het_status npu_register_memory(het_device *dev, void *base, size_t size, enum het_memory_kind kind,
                                           het_error *err)
{
    struct npu_ctx *c = dev->context;
    if (!c->hw) return HET_OK;      /* the emulator reads host memory directly */
    return npu_hw_register(c->hw, base, size, err);
}

/* The scheduler's pool: registered like any region (the hardware path maps
 * it as a user-page BO; the emulator needs nothing), and from now on the
 * home of repacked weights (npu_weights.c), unless the caller chose one. */
static enum het_status npu_register_pool(het_device *dev, struct het_pool *pool, het_error *err)
{
    struct npu_ctx *c = dev->context;
    enum het_status st = npu_register_memory(dev, het_pool_base(pool), het_pool_size(pool), HET_MEMORY_STATE, err);
    if (st == HET_OK && !c->pool) c->pool = pool;
    if (st == HET_OK && c->hw)
        snprintf(dev->pool_import, sizeof dev->pool_import, "%s (bound when weights are)",
                 het_pool_dmabuf_fd(pool) >= 0 ? "dma-buf via DRM PRIME" : "user-page BO");
    return st;
}

static void npu_unregister_memory(het_device *dev, void *base)
{
    struct npu_ctx *c = dev->context;
    if (c->hw) npu_hw_unregister(c->hw, base);
}

static enum het_status npu_prepare_weights(het_device *dev, struct het_tensor *const *weights, int n, het_error *err)
{
    struct npu_ctx *c = dev->context;
    enum het_status st = npu_weights_prepare(c, weights, n, err);
    if (st != HET_OK) het_error_prefix(err, "npu: prepare_weights");
    return st;
}

static enum het_status npu_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct npu_ctx *c = dev->context;
    for (int i = 0; i < n; i++) {
        struct het_tensor *node = nodes[i];
        if (node->op == HET_OP_VIEW || node->op == HET_OP_NONE) continue;
        if (!npu_node_ok(c, node))
            return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: cannot run %s '%s' (%s)", het_op_name(node->op),
                                 node->name, node->src[0] ? het_type_name(node->src[0]->type) : "-");
        enum het_status st = node->op == HET_OP_MUL_MAT_ID ? npu_exec_mul_mat_id(c, node, err)
                                                            : npu_exec_matmul(c, node, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

static void npu_free(het_device *dev)
{
    struct npu_ctx *c = dev->context;
    if (!c) return;
    npu_weights_free_all(c);
    npu_ring_free(&c->ring);
    npu_hw_close(c->hw);
    free(c->act);
    free(c->out);
    free(c->row);
    free(c);
    dev->context = NULL;
}

/* Its own cost model (npu_profile.c), with the device's identity and caps. */
static het_profile *npu_default_profile(const het_device *dev, het_error *err)
{
    const struct npu_ctx *c = dev->context;
    het_profile *p = het_profile_from_npu(&c->profile, dev->name, dev->desc, err);
    if (p) het_profile_set_caps(p, &dev->caps);
    return p;
}

static const struct het_device_i npu_iface = {
    /* .supports_op        = */ npu_supports_op,
    /* .register_memory    = */ npu_register_memory,
    /* .unregister_memory  = */ npu_unregister_memory,
    /* .prepare_weights    = */ npu_prepare_weights,
    /* .run_split          = */ npu_run_split,
    /* .sync               = */ NULL,  /* run_split waits for its commands */
    /* .free               = */ npu_free,
    /* .register_pool      = */ npu_register_pool,
    /* .default_profile    = */ npu_default_profile,
    /* .release_weights    = */ NULL, /* its weight copies live until the device is freed */
    /* .expect_run         = */ NULL, /* its runs start no threads of its own */
};

/* ---- construction --------------------------------------------------------------- */

void het_npu_params_default(struct het_npu_params *p, enum het_npu_mode mode)
{
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->act = HET_NPU_ACT_INT8;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

static enum het_status init_ring(struct npu_ctx *c, het_error *err)
{
    if (!c->params.pin_budget) return HET_OK;            /* everything resident: no staging */
    size_t slot = c->params.staging_bytes ? c->params.staging_bytes : (size_t)64 << 20;
    if (!c->hw) return npu_ring_init(&c->ring, slot, err);
    void *s0, *s1;
    enum het_status st = npu_hw_staging(c->hw, slot, &s0, &s1, err);
    if (st == HET_OK) npu_ring_init_external(&c->ring, s0, s1, slot);
    return st;
}

/* params.act_group resolved: 0 takes $HET_NPU_ACT_GROUP ("32", "row"), else 32. */
static enum het_status resolve_act_group(struct het_npu_params *p, het_error *err)
{
    if (p->act != HET_NPU_ACT_INT8 && p->act != HET_NPU_ACT_BF16)
        return het_error_set(err, HET_ERR_INVALID, "npu: activation format %d is neither int8 nor bf16", (int)p->act);
    if (p->act_group == 0) {
        const char *e = getenv("HET_NPU_ACT_GROUP");
        if (!e || !*e || !strcmp(e, "32")) p->act_group = HET_NPU_ACT_GROUP_32;
        else if (!strcasecmp(e, "row") || !strcasecmp(e, "k")) p->act_group = HET_NPU_ACT_GROUP_ROW;
        else return het_error_set(err, HET_ERR_INVALID, "npu: HET_NPU_ACT_GROUP='%.32s' is neither 32 nor row", e);
    }
    if (p->act_group != HET_NPU_ACT_GROUP_32 && p->act_group != HET_NPU_ACT_GROUP_ROW)
        return het_error_set(err, HET_ERR_INVALID, "npu: act_group %d is neither 32 nor HET_NPU_ACT_GROUP_ROW",
                             p->act_group);
    return HET_OK;
}

static void describe(het_device *dev, const struct npu_ctx *c)
{
    const char *act = c->params.act == HET_NPU_ACT_BF16 ? "bf16"
                    : c->params.act_group == HET_NPU_ACT_GROUP_ROW ? "int8 per-row" : "int8 per-32";
    const char *gen = c->profile.gen == HET_NPU_XDNA2 ? "XDNA2" : "XDNA1";
    if (c->hw) {
        struct het_npu_hw_info hi;
        npu_hw_get_info(c->hw, &hi);
        snprintf(dev->desc, sizeof dev->desc, "AMD NPU %s (%s %d.%d.%d, fw %u.%u.%u, AIE %ux%u), %s activations, "
                 "kernels %.80s", gen, hi.driver, hi.drv_major, hi.drv_minor, hi.drv_patch, hi.fw_major, hi.fw_minor,
                 hi.fw_patch, hi.cols, hi.rows, act, c->kernel_pack);
    } else {
        snprintf(dev->desc, sizeof dev->desc, "AMD NPU %s contract on the CPU (emulated), %s activations, "
                 "profile defaults (emulated figures)", gen, act);
    }
}

het_device *het_npu_device_init_params(const struct het_npu_params *p, het_error *err)
{
    if (!p || (p->mode != HET_NPU_EMULATE && p->mode != HET_NPU_HARDWARE)) {
        het_error_set(err, HET_ERR_INVALID, "npu: mode must be emulate or hardware");
        return NULL;
    }
    struct het_npu_params rp = *p;
    if (resolve_act_group(&rp, err) != HET_OK) return NULL;
    struct npu_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
        return NULL;
    }
    c->params = rp;
    copy_str(c->kernel_pack, sizeof c->kernel_pack, p->kernel_pack ? p->kernel_pack : getenv("HET_NPU_KERNELS"));
    copy_str(c->cache_dir, sizeof c->cache_dir, p->cache_dir);
    copy_str(c->model_key, sizeof c->model_key, p->model_key);
    c->params.kernel_pack = c->params.cache_dir = c->params.model_key = NULL;
    if (p->cache_dir) c->params.cache_dir = c->cache_dir;
    c->pool = p->pool;
    het_npu_profile_default(p->gen ? p->gen : HET_NPU_XDNA1, &c->profile);
    het_device *dev = het_device_new(&npu_iface, HET_DEVICE_NPU, "npu", c);
    if (!dev) {
        free(c);
        het_error_set(err, HET_ERR_NOMEM, "npu: out of memory");
        return NULL;
    }
    c->dev = dev;
    dev->emulated = p->mode == HET_NPU_EMULATE;
    /* run_split waits for its commands; emulated, the kernels run on the
     * CPU's threads through its mapping, and its wall time says nothing of
     * the hardware (its profile is the cost model, npu_profile.c) */
    dev->caps = (struct het_device_caps){ .async = false, .host_mapped = dev->emulated, .lossy = true,
                                          .shares_cpu_cores = dev->emulated, .host_timed = !dev->emulated,
                                          .repacks_weights = true };
    enum het_status st = HET_OK;
    if (p->mode == HET_NPU_HARDWARE) st = npu_hw_open(c, err);   /* may set the profile's generation */
    if (st == HET_OK) st = init_ring(c, err);
    if (st != HET_OK) {
        het_device_free(dev);
        return NULL;
    }
    describe(dev, c);
    dev->roofline = (struct het_roofline){ .gbps = c->profile.weight_gbps, .gflops = c->profile.int8_gops,
                                           .t0_us = c->profile.dispatch_us, .split_us = 0,
                                           .switch_us = c->profile.switch_us,
                                           .source = "NPU cost model figures (npu_profile.c)" };
    return dev;
}

het_device *het_npu_device_init(enum het_npu_mode mode, het_error *err)
{
    struct het_npu_params p;
    het_npu_params_default(&p, mode);
    return het_npu_device_init_params(&p, err);
}

/* ---- modes ------------------------------------------------------------------------ */

enum het_status het_npu_parse_mode(const char *s, enum het_npu_mode *out, het_error *err)
{
    if (!s || !*s || !strcasecmp(s, "off") || !strcasecmp(s, "none") || !strcmp(s, "0")) *out = HET_NPU_OFF;
    else if (!strcasecmp(s, "emulate") || !strcasecmp(s, "emul") || !strcasecmp(s, "emulated")) *out = HET_NPU_EMULATE;
    else if (!strcasecmp(s, "hardware") || !strcasecmp(s, "hw")) *out = HET_NPU_HARDWARE;
    else return het_error_set(err, HET_ERR_INVALID, "npu: unknown mode '%.64s' (emulate, hardware or off)", s);
    return HET_OK;
}

enum het_status het_npu_mode_from_env(enum het_npu_mode *out, het_error *err)
{
    enum het_status st = het_npu_parse_mode(getenv("HET_NPU"), out, err);
    if (st != HET_OK) het_error_prefix(err, "HET_NPU");
    return st;
}

const char *het_npu_mode_name(enum het_npu_mode mode)
{
    switch (mode) {
    case HET_NPU_EMULATE:  return "emulate";
    case HET_NPU_HARDWARE: return "hardware";
    default:               return "off";
    }
}

/* ---- queries ------------------------------------------------------------------------ */

bool het_npu_is_npu(const het_device *dev) { return ctx_of(dev) != NULL; }

const struct het_npu_profile *het_npu_get_profile(const het_device *dev)
{
    const struct npu_ctx *c = ctx_of(dev);
    return c ? &c->profile : NULL;
}

bool het_npu_set_profile(het_device *dev, const struct het_npu_profile *p)
{
    struct npu_ctx *c = ctx_of(dev);
    if (!c || !p) return false;
    c->profile = *p;
    return true;
}

bool het_npu_get_stats(const het_device *dev, struct het_npu_stats *out)
{
    const struct npu_ctx *c = ctx_of(dev);
    if (!c) return false;
    *out = c->stats;
    return true;
}

bool het_npu_get_hw_info(const het_device *dev, struct het_npu_hw_info *out)
{
    const struct npu_ctx *c = ctx_of(dev);
    return c && c->hw && npu_hw_get_info(c->hw, out);
}

bool het_npu_set_pool(het_device *dev, struct het_pool *pool)
{
    struct npu_ctx *c = ctx_of(dev);
    if (!c) return false;
    c->pool = pool;
    return true;
}

bool het_npu_pool_provider(het_device *dev, struct het_pool_npu_provider *out)
{
    struct npu_ctx *c = ctx_of(dev);
    return c && c->hw && npu_hw_pool_provider(c->hw, out);
}
