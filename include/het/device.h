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

/* Per-device counters (for --stats and the fallback log). */
struct het_device_stats {
    uint64_t n_splits;       /* splits run                                   */
    uint64_t n_nodes;        /* nodes run                                    */
    uint64_t copied_bytes;   /* bytes copied because memory was not shared   */
    double   busy_us;        /* wall time spent in run+sync, microseconds    */
};
void het_device_get_stats(const het_device *dev, struct het_device_stats *out);
/* How the device reaches the memory pool it holds: "dma-buf import",
 * "host-pointer import", "mirrored (explicit copies, counted)", "CPU mapping
 * (nothing to import)", ...; "" when it holds none. */
const char *het_device_pool_import(const het_device *dev);

/* CPU device. n_threads <= 0: physical cores (hwloc). */
het_device *het_cpu_device_init(int n_threads, het_error *err);
int         het_cpu_device_n_threads(const het_device *dev);
/* Keep matmul activations in F32 and dequantise quantised weights on the fly,
 * instead of rounding activations to 8 bits for integer dot products: the
 * logits are then those of the F32 weights (within summation order), and
 * a Qwen3-0.6B Q4_0 run is 3-4x slower (docs/accuracy.md). Off by default.
 * Choose before weights are prepared; the device's description (and so its
 * calibration profile) says so. */
enum het_status het_cpu_device_set_f32_activations(het_device *dev, bool on, het_error *err);

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

#ifdef __cplusplus
}
#endif
#endif /* HET_DEVICE_H */
