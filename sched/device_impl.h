/*
 * device_impl.h — the backend interface every device implements (internal).
 *
 * In the spirit of ggml's backend interface: a struct of function pointers
 * (het_device_i) held in the device object next to the backend's private
 * context. Optional slots are marked "(optional)" with the default the
 * dispatcher in sched/device.c applies when the slot is NULL, so backends
 * never check for each other.
 *
 * Memory model: every tensor's storage is host-addressable (a mapped pool
 * slice, the mmap'd GGUF, or a scratch region). Before running anything the
 * scheduler registers each region with every device (register_memory);
 * a device either imports the pages (zero copy: VK_EXT_external_memory_host,
 * dma-buf, DRM PRIME) or mirrors them and counts the bytes it copies.
 * A device then finds a tensor's storage from its host address.
 *
 * With a shared pool (het/pool.h) the whole pool is registered once per
 * device (register_pool, reference-counted by the dispatcher so several
 * schedulers may share a device and a pool); every tensor of the run then
 * lies inside that one region. Bytes a device copies (its stats.copied_bytes)
 * while it holds a pool are forwarded to het_pool_count_copy by the
 * dispatchers, so the pool's counter is the run's total.
 */
#ifndef HET_DEVICE_IMPL_H
#define HET_DEVICE_IMPL_H

#include "het/device.h"
#include "het/graph.h"

struct het_pool;

enum het_memory_kind {
    HET_MEMORY_WEIGHTS = 0, /* read-only model parameters                   */
    HET_MEMORY_STATE   = 1, /* persistent read/write (KV cache)             */
    HET_MEMORY_SCRATCH = 2, /* activations, rewritten every graph           */
};

struct het_device_i {
    /* Can this device run node (op, types, shapes, strides)? Must be cheap
     * and pure: the planner calls it for every node of every graph. */
    bool (*supports_op)(het_device *dev, const struct het_tensor *node);

    /* (optional) Make [base, base+size) usable by the device (import, or
     * mirror + copy). Called once per region before any run_split touching
     * it; defaults to nothing (the CPU reads host memory directly). */
    enum het_status (*register_memory)(het_device *dev, void *base, size_t size, enum het_memory_kind kind,
                                       het_error *err);
    /* (optional) Forget a region (before it is unmapped). Defaults to nothing. */
    void (*unregister_memory)(het_device *dev, void *base);

    /* (optional) Called once per model with its weight tensors: upload,
     * repack or cache device layouts (t->extra). Defaults to nothing. */
    enum het_status (*prepare_weights)(het_device *dev, struct het_tensor *const *weights, int n,
                                       het_error *err);

    /* Run nodes[0..n) in order. May return before completion; results are
     * visible to the host and other devices after sync. */
    enum het_status (*run_split)(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err);

    /* (optional) Wait for everything submitted. Defaults to nothing (the
     * device's run_split is synchronous). */
    enum het_status (*sync)(het_device *dev, het_error *err);

    /* (optional) Release the context. Defaults to nothing. */
    void (*free)(het_device *dev);

    /* (optional) Import the whole pool once (its dma-buf, else its host
     * pages, else a mirror with counted copies) and keep it for what the
     * device allocates itself (repacked weights). Undone by
     * unregister_memory(dev, het_pool_base(pool)). The pool outlives the
     * device. Defaults to register_memory(base, size, HET_MEMORY_STATE).
     * Last in the struct so positional initialisers stay valid. */
    enum het_status (*register_pool)(het_device *dev, struct het_pool *pool, het_error *err);

    /* (optional) The device's own unmeasured cost model as a planner profile
     * (het/profile.h), for a device whose costs a roofline does not follow
     * (the NPU: dispatch + max(weight streaming, MACs on padded M)). NULL
     * (err set) on failure. Defaults to a roofline profile from
     * dev->roofline (het_profile_default). */
    struct het_profile *(*default_profile)(const het_device *dev, het_error *err);

    /* (optional) Undo prepare_weights for these tensors (before their memory
     * goes): free what the device made of them and clear t->extra where it
     * set it. Defaults to nothing (a device that keeps no layout of its own). */
    void (*release_weights)(het_device *dev, struct het_tensor *const *weights, int n);

    /* (optional) A graph is being prepared and will run soon: a device whose
     * threads sleep between runs wakes them now, so that the time a sleeping
     * core takes to come back is spent while the host still builds, plans
     * and schedules the graph. Defaults to nothing. */
    void (*expect_run)(het_device *dev);
};

struct het_device {
    struct het_device_i     iface;
    enum het_device_kind    kind;
    bool                    emulated;     /* executes on something other than the hardware named */
    struct het_device_caps  caps;         /* set by the backend at creation                       */
    struct het_roofline     roofline;     /* the backend's unmeasured figures                     */
    char                    name[32];     /* "cpu", "vulkan0"                                       */
    char                    desc[256];    /* one line for listings                                  */
    struct het_device_stats stats;
    void                   *context;      /* backend-private                                        */
    struct het_pool        *pool;         /* registered pool (het_device_register_pool) or NULL     */
    int                     pool_refs;    /* schedulers holding that registration                   */
    uint64_t                pool_copied;  /* stats.copied_bytes already forwarded to the pool       */
    char                    pool_import[96]; /* how it reaches the pool (register_pool may set it)   */
    uint64_t                ran[HET_OP_COUNT]; /* kinds of node run: bit 2*type + (several rows)    */
    /* During run_split: the storage layout the nodes run under, as the
     * scheduler names it (het_device_run_split_in), or 0 when unknown. Two
     * run_split calls with the same nodes and n under the same nonzero
     * layout run the same graph, of which only views may have moved or
     * changed extent (het_sched_realloc_graph's contract), with them the
     * nodes that are views or read or write one; every other node is the
     * node it was, at the same storage. A device may keep what it decided
     * about those nodes (the CPU device: its per-node decisions). */
    uint64_t                layout;
};

/* Dispatchers (apply the optional-slot defaults, keep stats). */
bool            het_device_supports_op(het_device *dev, const struct het_tensor *node);
enum het_status het_device_register_memory(het_device *dev, void *base, size_t size, enum het_memory_kind kind,
                                           het_error *err);
void            het_device_unregister_memory(het_device *dev, void *base);
void            het_device_release_weights(het_device *dev, struct het_tensor *const *weights, int n);
void            het_device_expect_run(het_device *dev);
enum het_status het_device_prepare_weights(het_device *dev, struct het_tensor *const *weights, int n,
                                           het_error *err);
enum het_status het_device_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err);
/* The same under a storage layout (het_device.layout; 0: unknown, as
 * het_device_run_split runs). */
enum het_status het_device_run_split_in(het_device *dev, struct het_tensor *const *nodes, int n, uint64_t layout,
                                        het_error *err);
enum het_status het_device_sync(het_device *dev, het_error *err);
/* Has a node of node's kind (op, first operand's type, one row or several)
 * run on dev? Recorded only where caps.builds_kernels (elsewhere always
 * false): one that has not may build a kernel when it first runs. */
bool            het_device_has_run(const het_device *dev, const struct het_tensor *node);
/* What building one kernel took on dev, on average, in this process
 * (stats.build_us / n_builds); NAN before the first build. */
double          het_device_build_estimate_us(const het_device *dev);
/* Register pool with dev (first call imports it; later calls with the same
 * pool only count a reference). HET_ERR_INVALID when dev already holds
 * another pool; the device's own error when it refuses the import. */
enum het_status het_device_register_pool(het_device *dev, struct het_pool *pool, het_error *err);
/* Drop one reference; the last one unregisters the pool's region. */
void            het_device_unregister_pool(het_device *dev, struct het_pool *pool);
/* Does the device touch memory through the CPU's own mapping (caps.host_mapped:
 * the CPU, an emulated NPU)? The executor opens the CPU access window around its splits. */
bool            het_device_uses_host_mapping(const het_device *dev);
/* The device's default_profile slot, or NULL without err when it has none. */
struct het_profile *het_device_default_profile(const het_device *dev, het_error *err);

/* For backends: allocate a device object with iface and context set. */
het_device *het_device_new(const struct het_device_i *iface, enum het_device_kind kind, const char *name,
                           void *context);

/* After a device has copied weight t into its own layout: when t is
 * HET_TENSOR_FLAG_DROPPABLE, give the whole pages of its bytes in the file
 * mapping back to the kernel (madvise DONTNEED; they stay in the page cache
 * and fault back in from the file if anything reads them again) and count
 * them in dev->stats.dropped_bytes; t gets HET_TENSOR_FLAG_DROPPED. Returns the bytes dropped (0 when t is
 * not droppable). */
size_t het_device_drop_weight_pages(het_device *dev, struct het_tensor *t);

#endif /* HET_DEVICE_IMPL_H */
