/*
 * vk_device.c — the Vulkan backend as a het_device (the vtable of
 * sched/device_impl.h) plus the public entry points of het/vulkan.h that
 * need an open device: init, info, profiling.
 *
 * run_split encodes every node, then records and submits one command buffer
 * and returns; sync waits for it. A node the device cannot run, or memory it
 * cannot reach, fails the whole split before anything is submitted.
 */
#include "devices/vulkan/vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool vk_supports_op(het_device *dev, const struct het_tensor *node)
{
    return het_vk_supports(het_vk_ctx_of(dev), node);
}

static enum het_status vk_register_memory(het_device *dev, void *base, size_t size, enum het_memory_kind kind,
                                          het_error *err)
{
    struct het_vk_ctx *ctx = het_vk_ctx_of(dev);
    if (ctx->lost) return het_error_set(err, HET_ERR_DEVICE_LOST, "vulkan: device lost earlier");
    return het_vk_region_add(ctx, base, size, kind, err);
}

static enum het_status vk_register_pool(het_device *dev, het_pool *pool, het_error *err)
{
    struct het_vk_ctx *ctx = het_vk_ctx_of(dev);
    if (ctx->lost) return het_error_set(err, HET_ERR_DEVICE_LOST, "vulkan: device lost earlier");
    return het_vk_pool_add(ctx, pool, err);
}

static void vk_unregister_memory(het_device *dev, void *base)
{
    het_vk_region_remove(het_vk_ctx_of(dev), base);
}

static enum het_status vk_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct het_vk_ctx *ctx = het_vk_ctx_of(dev);
    enum het_status st = het_vk_split_begin(ctx, n, err);
    for (int i = 0; st == HET_OK && i < n; i++) {
        if (ctx->profiling) {
            struct het_vulkan_op_time *p = &ctx->split.prof[i];
            p->op = nodes[i]->op;
            snprintf(p->name, sizeof p->name, "%s", nodes[i]->name);
            p->gpu_us = 0;
        }
        st = het_vk_encode_node(ctx, nodes[i], i, err);
        if (st != HET_OK) het_error_prefix(err, "node %d", i);
    }
    if (st == HET_OK) st = het_vk_split_submit(ctx, err);
    return st;
}

static enum het_status vk_sync(het_device *dev, het_error *err)
{
    struct het_vk_ctx *ctx = het_vk_ctx_of(dev);
    if (ctx->lost) return het_error_set(err, HET_ERR_DEVICE_LOST, "vulkan: device lost");
    return het_vk_wait(ctx, err);
}

static void vk_free(het_device *dev)
{
    struct het_vk_ctx *ctx = het_vk_ctx_of(dev);
    if (!ctx) return;
    het_vk_ctx_close(ctx);
    free(ctx);
    dev->context = NULL;
}

static const struct het_device_i vk_iface = {
    .supports_op = vk_supports_op,
    .register_memory = vk_register_memory,
    .unregister_memory = vk_unregister_memory,
    .run_split = vk_run_split,
    .sync = vk_sync,
    .free = vk_free,
    .register_pool = vk_register_pool,
};

static const char *type_name(enum het_vulkan_device_type t)
{
    switch (t) {
    case HET_VULKAN_TYPE_INTEGRATED: return "integrated";
    case HET_VULKAN_TYPE_DISCRETE:   return "discrete";
    case HET_VULKAN_TYPE_VIRTUAL:    return "virtual";
    case HET_VULKAN_TYPE_CPU:        return "cpu";
    default:                         return "other";
    }
}

het_device *het_vk_device_init_opts(int index, const struct het_vk_options *opt, het_error *err)
{
    struct het_vk_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory");
        return NULL;
    }
    if (opt) ctx->opt = *opt;
    het_device *dev = het_device_new(&vk_iface, HET_DEVICE_VULKAN, "vulkan", ctx);
    if (!dev) {
        free(ctx);
        het_error_set(err, HET_ERR_NOMEM, "vulkan: out of memory");
        return NULL;
    }
    ctx->dev = dev;
    if (het_vk_ctx_open(ctx, index, err) != HET_OK) {
        het_device_free(dev);
        return NULL;
    }
    const struct het_vulkan_device_info *in = &ctx->info;
    snprintf(dev->name, sizeof dev->name, "vulkan%d", in->index);
    snprintf(dev->desc, sizeof dev->desc, "%.96s (%s; %.24s %.48s; subgroup %u%s; %s)", in->name, type_name(in->type),
             in->driver_name, in->driver_info, in->subgroup_size, ctx->use_subgroup ? " arith" : "",
             ctx->import_ok ? (ctx->own_memory ? "host import, weights uploaded" : "host import")
                            : ctx->import_refused ? "mirrored memory: the driver refused host import"
                                                  : "mirrored memory");
    dev->emulated = in->type == HET_VULKAN_TYPE_CPU;
    /* a CPU-type driver (lavapipe) runs its shaders on the CPU's cores: beside
     * the CPU device it competes for them instead of overlapping */
    const bool on_cpu = in->type == HET_VULKAN_TYPE_CPU;
    dev->caps = (struct het_device_caps){ .async = true, .host_mapped = false, .lossy = false,
                                          .shares_cpu_cores = on_cpu, .host_timed = true, .repacks_weights = false,
                                          .builds_kernels = true,
                                          .own_memory = ctx->own_memory };
    dev->roofline = on_cpu ? (struct het_roofline){ .gbps = 40, .gflops = 100, .t0_us = 8.0, .split_us = 60,
                                                    .source = "CPU-type Vulkan driver: 40 GB/s, 100 GFLOP/s, "
                                                              "60 us a submit" }
                           : (struct het_roofline){ .gbps = 80, .gflops = 4000, .t0_us = 8.0, .split_us = 60,
                                                    .source = "iGPU: 80 GB/s, 4 TFLOP/s, 60 us a submit" };
    return dev;
}

het_device *het_vulkan_device_init(int index, het_error *err)
{
    return het_vk_device_init_opts(index, NULL, err);
}

static struct het_vk_ctx *vk_ctx(const het_device *dev)
{
    if (!dev || dev->kind != HET_DEVICE_VULKAN || dev->iface.free != vk_free) return NULL;
    return dev->context;
}

bool het_vulkan_device_get_info(const het_device *dev, struct het_vulkan_device_info *out)
{
    const struct het_vk_ctx *ctx = vk_ctx(dev);
    if (!ctx) return false;
    *out = ctx->info;
    return true;
}

bool het_vulkan_device_imports_weights(const het_device *dev)
{
    const struct het_vk_ctx *ctx = vk_ctx(dev);
    return ctx && ctx->import_ok && !ctx->own_memory;
}

enum het_status het_vulkan_profiling_enable(het_device *dev, bool enable, het_error *err)
{
    struct het_vk_ctx *ctx = vk_ctx(dev);
    if (!ctx) return het_error_set(err, HET_ERR_INVALID, "vulkan: profiling on a non-Vulkan device");
    if (enable && !ctx->timestamps)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "vulkan: %s has no compute-queue timestamps", ctx->info.name);
    ctx->profiling = enable;
    return HET_OK;
}

int het_vulkan_profiling_read(het_device *dev, struct het_vulkan_op_time *out, int max)
{
    struct het_vk_ctx *ctx = vk_ctx(dev);
    if (!ctx || max <= 0) return 0;
    int n = ctx->n_records < max ? ctx->n_records : max;
    memcpy(out, ctx->records, (size_t)n * sizeof *out);
    memmove(ctx->records, ctx->records + n, (size_t)(ctx->n_records - n) * sizeof *out);
    ctx->n_records -= n;
    return n;
}
