/*
 * device.c — dispatch through the device vtable, applying the defaults of
 * optional slots and keeping per-device counters. Backends only fill in
 * what they implement. The dispatchers also keep a device's pool
 * registration (reference-counted) and forward the bytes a device copies
 * to that pool's counter, so no backend needs to know about the counter.
 */
#include "sched/device_impl.h"

#include "het/pool.h"
#include "sched/clock.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

het_device *het_device_new(const struct het_device_i *iface, enum het_device_kind kind, const char *name,
                           void *context)
{
    het_device *dev = calloc(1, sizeof *dev);
    if (!dev) return NULL;
    dev->iface = *iface;
    dev->kind = kind;
    dev->context = context;
    snprintf(dev->name, sizeof dev->name, "%s", name);
    return dev;
}

void het_device_free(het_device *dev)
{
    if (!dev) return;
    if (dev->iface.free) dev->iface.free(dev);
    free(dev);
}

const char *het_device_name(const het_device *dev) { return dev->name; }
const char *het_device_description(const het_device *dev) { return dev->desc; }
enum het_device_kind het_device_kind(const het_device *dev) { return dev->kind; }
bool het_device_is_emulated(const het_device *dev) { return dev->emulated; }

void het_device_get_stats(const het_device *dev, struct het_device_stats *out) { *out = dev->stats; }

bool het_device_supports_op(het_device *dev, const struct het_tensor *node)
{
    return dev->iface.supports_op(dev, node);
}

enum het_status het_device_register_memory(het_device *dev, void *base, size_t size, enum het_memory_kind kind,
                                           het_error *err)
{
    if (!dev->iface.register_memory) return HET_OK; /* host memory is directly usable */
    return dev->iface.register_memory(dev, base, size, kind, err);
}

void het_device_unregister_memory(het_device *dev, void *base)
{
    if (dev->iface.unregister_memory) dev->iface.unregister_memory(dev, base);
}

enum het_status het_device_prepare_weights(het_device *dev, struct het_tensor *const *weights, int n,
                                           het_error *err)
{
    if (!dev->iface.prepare_weights) return HET_OK;
    return dev->iface.prepare_weights(dev, weights, n, err);
}

void het_device_release_weights(het_device *dev, struct het_tensor *const *weights, int n)
{
    if (dev->iface.release_weights) dev->iface.release_weights(dev, weights, n);
}

void het_device_expect_run(het_device *dev)
{
    if (dev->iface.expect_run) dev->iface.expect_run(dev);
}

/* Forward copies the device made since the last call to its pool's counter. */
static void forward_copies(het_device *dev)
{
    if (!dev->pool || dev->stats.copied_bytes <= dev->pool_copied) return;
    het_pool_count_copy(dev->pool, (size_t)(dev->stats.copied_bytes - dev->pool_copied));
    dev->pool_copied = dev->stats.copied_bytes;
}

/* A node's kind for het_device_has_run: its op, and bit 2 * type of its
 * first operand + 1 when it has several rows (a matmul's GEMV and GEMM
 * kernels differ). */
_Static_assert(2 * HET_TYPE_COUNT <= 64, "het_device.ran holds two bits per type");

static bool node_kind(const struct het_tensor *t, unsigned *op, unsigned *bit)
{
    const struct het_tensor *a = t->src[0] ? t->src[0] : t, *rows = t->src[1] ? t->src[1] : t;
    if ((unsigned)t->op >= HET_OP_COUNT || (unsigned)a->type >= HET_TYPE_COUNT) return false;
    *op = (unsigned)t->op;
    *bit = 2u * (unsigned)a->type + (rows->ne[1] * rows->ne[2] * rows->ne[3] > 1);
    return true;
}

bool het_device_has_run(const het_device *dev, const struct het_tensor *node)
{
    unsigned op, bit;
    return node_kind(node, &op, &bit) && (dev->ran[op] >> bit & 1u);
}

double het_device_build_estimate_us(const het_device *dev)
{
    return dev->stats.n_builds ? dev->stats.build_us / (double)dev->stats.n_builds : NAN;
}

enum het_status het_device_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err)
{
    return het_device_run_split_in(dev, nodes, n, 0, err);
}

enum het_status het_device_run_split_in(het_device *dev, struct het_tensor *const *nodes, int n, uint64_t layout,
                                        het_error *err)
{
    double t0 = het_now_us();
    dev->layout = layout;
    enum het_status st = dev->iface.run_split(dev, nodes, n, err);
    dev->layout = 0;
    dev->stats.busy_us += het_now_us() - t0;
    forward_copies(dev);
    if (st == HET_OK) {
        dev->stats.n_splits++;
        dev->stats.n_nodes += (uint64_t)n;
        /* only where a first run may build a kernel: the CPU's splits skip this */
        for (int i = 0; dev->caps.builds_kernels && i < n; i++) {
            unsigned op, bit;
            if (node_kind(nodes[i], &op, &bit)) dev->ran[op] |= 1ull << bit;
        }
    } else if (err) {
        het_error_prefix(err, "%s", dev->name);
    }
    return st;
}

enum het_status het_device_sync(het_device *dev, het_error *err)
{
    if (!dev->iface.sync) return HET_OK;
    double t0 = het_now_us();
    enum het_status st = dev->iface.sync(dev, err);
    dev->stats.busy_us += het_now_us() - t0;
    forward_copies(dev);
    if (st != HET_OK && err) het_error_prefix(err, "%s", dev->name);
    return st;
}

enum het_status het_device_register_pool(het_device *dev, struct het_pool *pool, het_error *err)
{
    if (dev->pool == pool) {
        dev->pool_refs++;
        return HET_OK;
    }
    if (dev->pool)
        return het_error_set(err, HET_ERR_INVALID, "%s: already uses another memory pool", dev->name);
    dev->pool = pool;                        /* registration uploads (a mirror) count too */
    dev->pool_copied = dev->stats.copied_bytes;
    dev->pool_import[0] = '\0';
    enum het_status st = dev->iface.register_pool
                             ? dev->iface.register_pool(dev, pool, err)
                             : het_device_register_memory(dev, het_pool_base(pool), het_pool_size(pool),
                                                          HET_MEMORY_STATE, err);
    forward_copies(dev);
    if (st != HET_OK) {
        dev->pool = NULL;
        if (err) het_error_prefix(err, "%s: importing the memory pool", dev->name);
        return st;
    }
    dev->pool_refs = 1;
    if (!dev->pool_import[0])
        snprintf(dev->pool_import, sizeof dev->pool_import, "%s",
                 het_device_uses_host_mapping(dev) ? "CPU mapping (nothing to import)" : "registered host region");
    return HET_OK;
}

void het_device_unregister_pool(het_device *dev, struct het_pool *pool)
{
    if (!pool || dev->pool != pool || --dev->pool_refs > 0) return;
    forward_copies(dev);
    het_device_unregister_memory(dev, het_pool_base(pool));
    dev->pool = NULL;
    dev->pool_refs = 0;
    dev->pool_import[0] = '\0';
}

const char *het_device_pool_import(const het_device *dev) { return dev->pool_import; }

size_t het_device_drop_weight_pages(het_device *dev, struct het_tensor *t)
{
    if (!(t->flags & HET_TENSOR_FLAG_DROPPABLE) || !t->data || t->view_src) return 0;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    /* whole pages only: a page shared with a neighbouring tensor stays */
    const uintptr_t lo = ((uintptr_t)t->data + page - 1) & ~(page - 1);
    const uintptr_t hi = ((uintptr_t)t->data + het_nbytes(t)) & ~(page - 1);
    if (hi <= lo || madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0) return 0;
    dev->stats.dropped_bytes += hi - lo;
    t->flags |= HET_TENSOR_FLAG_DROPPED;
    return hi - lo;
}

bool het_device_uses_host_mapping(const het_device *dev) { return dev->caps.host_mapped; }

const struct het_device_caps *het_device_get_caps(const het_device *dev) { return &dev->caps; }
const struct het_roofline *het_device_get_roofline(const het_device *dev) { return &dev->roofline; }

struct het_profile *het_device_default_profile(const het_device *dev, het_error *err)
{
    return dev->iface.default_profile ? dev->iface.default_profile(dev, err) : NULL;
}
