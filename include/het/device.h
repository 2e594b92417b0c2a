/*
 * device.h — the compute devices het can place work on (public view).
 *
 * A het_device is an opaque handle to one backend instance: the CPU (SIMD
 * kernels, OpenMP threads), a Vulkan physical device, or the NPU (amdxdna, or
 * the emulated NPU that executes the same kernel contract on the CPU). The
 * scheduler talks to every device through one vtable (sched/device_impl.h);
 * nothing above sched/ knows which device runs an op.
 */
#ifndef HET_DEVICE_H
#define HET_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct het_device het_device;

enum het_device_kind {
    HET_DEVICE_CPU    = 0,
    HET_DEVICE_VULKAN = 1,
    HET_DEVICE_NPU    = 2,
    HET_DEVICE_KIND_COUNT,
};

const char          *het_device_name(const het_device *dev);        /* "cpu", "vulkan0", "npu"      */
const char          *het_device_description(const het_device *dev); /* one line: model, driver, ... */
enum het_device_kind het_device_kind(const het_device *dev);
bool                 het_device_is_emulated(const het_device *dev); /* figures are not hardware's   */
void                 het_device_free(het_device *dev);              /* NULL is a no-op              */

/* What a device is, as far as the scheduler and the planner must know it.
 * Its backend sets these when it creates the device, so nothing above
 * devices/ asks which kind of device it is. */
struct het_device_caps {
    bool async;            /* run_split may return before the work is done (sync waits):
                              its work overlaps what the host thread does next            */
    bool host_mapped;      /* reads and writes tensors through the CPU's own mapping      */
    bool lossy;            /* approximates beyond the CPU's rounding (int8 activations):
                              placed under the accuracy budget                            */
    bool shares_cpu_cores; /* executes on the CPU's cores (the CPU, a CPU-type Vulkan
                              driver such as lavapipe, an emulated NPU): its work competes
                              with the CPU's threads and never overlaps them              */
    bool host_timed;       /* timing it here measures it: calibration may time it (false:
                              an emulation; its profile comes from its cost model)        */
    bool repacks_weights;  /* prepare_weights keeps its own layout of the weights in the
                              memory pool (the pool is sized for it)                      */
    bool builds_kernels;   /* compiles a kernel the first time a kind of node runs (a
                              Vulkan driver's pipelines): that first run pays the build,
                              counted in stats.n_builds / build_us                        */
    bool own_memory;       /* reads the weights from memory of its own (a discrete GPU: they
                              are uploaded once): the host's read bandwidth does not bound it */
};
const struct het_device_caps *het_device_get_caps(const het_device *dev);

/* The figures a backend claims for its kind of hardware before anything is
 * measured (the planner's unmeasured defaults; het_profile_default). */
struct het_roofline {
    double      gbps;       /* memory bandwidth                               */
    double      gflops;     /* arithmetic rate                                */
    double      t0_us;      /* fixed cost of one op                           */
    double      split_us;   /* starting a split (submit, barrier)             */
    double      switch_us;  /* changing compiled kernel between nodes, or 0   */
    const char *source;     /* where the figures come from, one line          */
};
const struct het_roofline *het_device_get_roofline(const het_device *dev);

/* Per-device counters (for --stats and the fallback log). */
struct het_device_stats {
    uint64_t n_splits;       /* splits run                                   */
    uint64_t n_nodes;        /* nodes run                                    */
    uint64_t copied_bytes;   /* bytes copied because memory was not shared   */
    double   busy_us;        /* wall time spent in run+sync, microseconds    */
    uint64_t dropped_bytes;  /* weight pages of the file mapping given back after repacking */
    uint64_t n_builds;       /* kernels built on first use (caps.builds_kernels)          */
    double   build_us;       /* wall time those builds took, microseconds                 */
    uint64_t n_splits_kept;  /* splits that ran on what the device decided about their nodes
                                the last time (the same nodes, storage moved on only for views) */
    uint64_t n_steps_kept;   /* of their steps, those run on plans the device made once for
                                them (CPU: a decode's matmul steps)                           */
};
void het_device_get_stats(const het_device *dev, struct het_device_stats *out);
/* How the device reaches the memory pool it holds: "dma-buf import",
 * "host-pointer import", "mirrored (explicit copies, counted)", "CPU mapping
 * (nothing to import)", ...; "" when it holds none. */
const char *het_device_pool_import(const het_device *dev);

/* CPU device. n_threads <= 0: physical cores (hwloc). */
het_device *het_cpu_device_init(int n_threads, het_error *err);
int         het_cpu_device_n_threads(const het_device *dev); /* 0: not a CPU device */
/* Keep matmul activations in F32 and dequantise quantised weights on the fly,
 * instead of rounding activations to 8 bits for integer dot products: the
 * logits are then those of the F32 weights (within summation order), and
 * a Qwen3-0.6B Q4_0 run is 3-4x slower (docs/accuracy.md). Off by default.
 * Choose before weights are prepared; the device's description (and so its
 * calibration profile) says so. */
enum het_status het_cpu_device_set_f32_activations(het_device *dev, bool on, het_error *err);

/* How the CPU device's decode runs asked for the weight lines ahead of
 * them: with NTA (kept out of the caches on their way out), T0 or T1 (into
 * L2), whichever its own decode splits ran fastest with in rounds that race
 * the hints, or fixed by the environment variable
 * HET_CPU_STREAM=nta|t0|t1|auto. Counts since the device was made; the
 * hand-off it measures between its threads is reported beside them. */
struct het_cpu_stream_stats {
    uint64_t splits_nta, splits_t0, splits_t1; /* splits that streamed decode weights, run
                                                  asking each way (probes not counted) */
    uint64_t races;                 /* rounds begun that race two hints or more      */
    double   handoff_ns;            /* the threads' last hand-off, median (0: none)   */
    double   far_ns;                /* from which the threads count as far apart     */
    bool     fixed;                 /* HET_CPU_STREAM chose, not the measure         */
};
enum het_status het_cpu_device_stream_stats(const het_device *dev, struct het_cpu_stream_stats *out);

/* The CPU's arithmetic limits, measured (~0.3 s) on n_threads threads
 * (<= 0: all) with the instructions of the kernel level het selects: int8
 * multiply-adds as the quantised matmuls issue them, and F32 FMAs. A
 * multiply-add counts two operations. HET_ERR_UNSUPPORTED at the scalar
 * level (no peak is claimed there). */
struct het_cpu_peak {
    double      int8_gops;   /* int8 multiply-add operations, G/s */
    double      f32_gflops;  /* F32 FMA operations, G/s           */
    const char *int8_instr;  /* "vpmaddubsw ymm", "vpdpbusd zmm"  */
    const char *f32_instr;
};
enum het_status het_cpu_measure_peak(int n_threads, struct het_cpu_peak *out, het_error *err);
/* Bytes of the largest cache of cpu0 that sysfs reports (0: none): what a
 * buffer must exceed to be read from memory. In a VM it is the host's
 * cache, shared with its other guests (sysconf's L3 figure is wrong in some
 * VMs, so it is not used). */
size_t het_cpu_largest_cache_bytes(void);

/* ---------------------------------------------------------------------------
 * The device registry (sched/registry.c): devices by name.
 *
 * A spec is "cpu", "vulkan" (the driver's preferred device), "vulkan:N",
 * "npu" (the mode from params, else $HET_NPU, else params' default, else
 * the hardware) or
 * "npu:MODE" (het/npu.h: hardware, emulate). "auto" is every usable device:
 * the CPU, each usable Vulkan device, the NPU when its hardware is there;
 * emulations only when named. */
struct het_device_spec_params {
    int         n_threads;        /* CPU and emulated NPU threads; <= 0: physical cores */
    bool        f32_activations;  /* CPU: het_cpu_device_set_f32_activations            */
    const char *npu_mode;         /* mode for a bare "npu" ("hardware", "emulate"); NULL: $HET_NPU */
    const char *npu_default;      /* when neither names one (NULL: "hardware")          */
    const char *model_key;        /* NPU repack cache key (e.g. path:size:mtime), or NULL */
};

/* One device from a spec (not "auto"). params may be NULL (defaults). */
het_device *het_device_init_by_spec(const char *spec, const struct het_device_spec_params *params, het_error *err);

/* What "auto" considered: each candidate, whether it was taken, and why not. */
struct het_device_candidate {
    char spec[16];     /* "cpu", "vulkan:0", "npu"                    */
    char name[32];     /* the device's name when opened, else ""      */
    bool taken;
    char why[224];     /* why it was skipped (or what it is, taken)   */
};
#define HET_DEVICE_MAX_CANDIDATES 16

/* Open a comma-separated list of specs, where "auto" expands as above, into
 * out[0..max); *n receives the count. cands (optional, up to
 * HET_DEVICE_MAX_CANDIDATES) receives what auto considered, *n_cands their
 * count. A device named twice is HET_ERR_INVALID. On failure nothing stays
 * open. */
enum het_status het_devices_open(const char *list, const struct het_device_spec_params *params, het_device **out,
                                 int max, int *n, struct het_device_candidate *cands, int *n_cands, het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_DEVICE_H */
