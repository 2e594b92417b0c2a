/*
 * device.c — dispatch through the device vtable, applying the defaults of
 * optional slots and keeping per-device counters. Backends only fill in
 * what they implement.
 */
#include "sched/device_impl.h"

#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

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

enum het_status het_device_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err)
{
    double t0 = now_us();
    enum het_status st = dev->iface.run_split(dev, nodes, n, err);
    dev->stats.busy_us += now_us() - t0;
    if (st == HET_OK) {
        dev->stats.n_splits++;
        dev->stats.n_nodes += (uint64_t)n;
    } else if (err) {
        het_error_prefix(err, "%s", dev->name);
    }
    return st;
}

enum het_status het_device_sync(het_device *dev, het_error *err)
{
    if (!dev->iface.sync) return HET_OK;
    double t0 = now_us();
    enum het_status st = dev->iface.sync(dev, err);
    dev->stats.busy_us += now_us() - t0;
    if (st != HET_OK && err) het_error_prefix(err, "%s", dev->name);
    return st;
}
