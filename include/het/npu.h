/*
 * npu.h — the NPU device (public view): AMD XDNA through the mainline
 * amdxdna driver, or the emulated NPU that executes the same kernel
 * contract on the CPU.
 *
 * What the NPU runs is one op: MUL_MAT with GGUF Q4_0, Q4_1, Q8_0 or Q4_K
 * weights, repacked once per model into the NPU tile layout, times F32
 * activations that the device quantises to int8 with dynamic scales, one
 * per group of 32 elements along K by default or one per row
 * (devices/npu/README.md states the contract, the layout and the error
 * bound). Everything else stays on the other devices: supports_op
 * says false and the planner routes it elsewhere.
 *
 * Modes:
 *   HET_NPU_EMULATE   the contract executed on the CPU (plain C + OpenMP):
 *                     same layout, same activation rounding, same padding.
 *                     Its name is "npu", its description says "(emulated)"
 *                     and het_device_is_emulated() is true, so every figure
 *                     it produces can be labelled as emulated.
 *   HET_NPU_HARDWARE  /dev/accel/accel* with driver amdxdna and a kernel
 *                     pack (HET_NPU_KERNELS or params.kernel_pack): xclbins
 *                     and instruction streams built with mlir-aie/IRON.
 *                     HET_ERR_NO_DEVICE when there is no such device.
 */
#ifndef HET_NPU_H
#define HET_NPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/device.h"
#include "het/graph.h"
#include "het/profile.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

struct het_pool;

enum het_npu_mode {
    HET_NPU_OFF      = 0,
    HET_NPU_EMULATE  = 1,
    HET_NPU_HARDWARE = 2,
};

/* Activation format the kernels take. */
enum het_npu_act {
    HET_NPU_ACT_INT8 = 0,  /* int8, one f32 scale d = amax/127 per activation group (default) */
    HET_NPU_ACT_BF16 = 1,  /* bf16, round to nearest even                                      */
};

/* int8 activation groups (het_npu_params.act_group): K elements per scale.
 * Scales are always dynamic (amax of the group at run time, never fixed). */
#define HET_NPU_ACT_GROUP_32  32   /* one scale per 32 elements (default)         */
#define HET_NPU_ACT_GROUP_ROW (-1) /* one scale per row (the group is K)          */

/* NPU generations with a default profile. */
enum het_npu_gen {
    HET_NPU_XDNA1 = 1,     /* Phoenix / Hawk Point (AIE2, 4x4 cores)            */
    HET_NPU_XDNA2 = 2,     /* Strix / Krackan (AIE2P, 4x8 cores)                */
};

/*
 * Cost-model parameters of an NPU (what the planner needs to place work).
 * matmul time = dispatch_us
 *             + max(weight bytes / weight_gbps, 2*M_padded*K*N / int8_gops)
 *             + activation and output bytes / io_gbps
 * plus switch_us whenever a different compiled kernel must be loaded.
 * The defaults are measured figures from the design notes (XDNA1 GEMV:
 * 0.15 ms + bytes / 38.5 GB/s; kernel switch ~2 ms), not measurements
 * of this machine: an emulated device reports them as "emulated".
 */
struct het_npu_profile {
    enum het_npu_gen gen;
    double dispatch_us;     /* fixed cost per command (submit + wait)        */
    double weight_gbps;     /* weight streaming rate, GB/s (decode bound)    */
    double io_gbps;         /* activation in / output out, GB/s              */
    double int8_gops;       /* sustained int8 MAC rate x2, G ops/s           */
    double switch_us;       /* loading another compiled kernel               */
    int    m_tile_gemm;     /* M is padded to this for M > 1                 */
    int    m_tile_gemv;     /* M tile of the decode kernel (M == 1)          */
    bool   emulated;        /* figures are defaults/emulation, not measured   */
};

/* Default profile for a generation (static table, documented in the README). */
void   het_npu_profile_default(enum het_npu_gen gen, struct het_npu_profile *out);
/* Predicted microseconds of one MUL_MAT of weights (K x N, type wtype) with M
 * activation rows on this profile, excluding kernel switches. */
double het_npu_profile_matmul_us(const struct het_npu_profile *p, enum het_type wtype, int64_t K, int64_t N,
                                 int64_t M);


struct het_npu_params {
    enum het_npu_mode mode;
    enum het_npu_act  act;           /* activation format (default int8)                     */
    int               act_group;     /* int8: HET_NPU_ACT_GROUP_32 or HET_NPU_ACT_GROUP_ROW;
                                        0: $HET_NPU_ACT_GROUP ("32" or "row"), else 32       */
    int               n_threads;     /* emulation threads; <= 0: OpenMP default               */
    struct het_pool  *pool;          /* repacked weights live here when set (not owned)       */
    const char       *kernel_pack;   /* hardware: kernel pack directory; NULL: $HET_NPU_KERNELS */
    const char       *cache_dir;     /* NULL: $XDG_CACHE_HOME/het/npu (or ~/.cache/het/npu)   */
    bool              no_cache;      /* do not read or write the repack cache                 */
    const char       *model_key;     /* cache key (e.g. GGUF path+size+mtime or a digest);
                                        NULL: a 64-bit hash of the weights' bytes            */
    size_t            pin_budget;    /* bytes of repacked weights kept resident for the NPU;
                                        beyond it weights stream through the staging ring.
                                        0: no limit                                          */
    size_t            staging_bytes; /* size of each of the two staging slots; 0: 64 MiB      */
    enum het_npu_gen  gen;           /* profile to use; 0: XDNA1 (emulate) or detected (hw)   */
    int               timeout_ms;    /* hardware command timeout; <= 0: 10000                 */
};

/* Defaults for a mode (int8 activations, act_group 0, cache on, no pin limit). */
void het_npu_params_default(struct het_npu_params *p, enum het_npu_mode mode);

/* The device. het_npu_device_init(mode, err) is params_default + init_params.
 * HET_NPU_OFF is HET_ERR_INVALID. */
het_device *het_npu_device_init(enum het_npu_mode mode, het_error *err);
het_device *het_npu_device_init_params(const struct het_npu_params *p, het_error *err);

/* "emulate", "emul", "hardware", "hw", "off" -> mode. NULL or "" -> HET_NPU_OFF.
 * HET_ERR_INVALID names the bad word. */
enum het_status het_npu_parse_mode(const char *s, enum het_npu_mode *out, het_error *err);
/* The mode requested by $HET_NPU (HET_NPU_OFF when unset). */
enum het_status het_npu_mode_from_env(enum het_npu_mode *out, het_error *err);
const char     *het_npu_mode_name(enum het_npu_mode mode);

/* True when dev is an NPU device created by het_npu_device_init*. */
bool het_npu_is_npu(const het_device *dev);
/* The profile the device uses (NULL if dev is not an NPU device). */
const struct het_npu_profile *het_npu_get_profile(const het_device *dev);
/* Replace it (e.g. with a calibrated one); false if dev is not an NPU device. */
bool het_npu_set_profile(het_device *dev, const struct het_npu_profile *p);

struct het_npu_stats {
    uint64_t repacked_tensors;    /* tensors repacked from GGUF blocks              */
    uint64_t repacked_bytes;      /* bytes of NPU layout produced or loaded          */
    uint64_t cache_loaded;        /* tensors read from the repack cache             */
    uint64_t cache_written;       /* tensors written to the repack cache            */
    uint64_t lazy_repacks;        /* weights repacked at first use (not prepared)   */
    uint64_t rejected;            /* weights the layout cannot take                 */
    uint64_t matmuls;             /* MUL_MAT nodes run                              */
    uint64_t padded_rows;         /* activation rows added to reach the M tile      */
    uint64_t kernel_switches;     /* compiled kernels loaded (hardware)             */
    uint64_t streamed_bytes;      /* weight bytes copied through the staging ring   */
    double   predicted_us;        /* profile's prediction for the work run so far   */
    bool     self_check_done;     /* hardware: sentinel GEMM ran                    */
    bool     self_check_ok;
    char     cache_path[512];     /* last cache file used ("" if none)               */
    char     cache_note[256];     /* why the cache was not used / not written        */
};
bool het_npu_get_stats(const het_device *dev, struct het_npu_stats *out);

/* Hardware information (filled for HET_NPU_HARDWARE; false otherwise). */
struct het_npu_hw_info {
    char     node[64];             /* "/dev/accel/accel0"                    */
    char     driver[32];           /* "amdxdna"                              */
    int      drv_major, drv_minor, drv_patch;
    uint32_t fw_major, fw_minor, fw_patch, fw_build;
    uint32_t aie_major, aie_minor; /* AIE version                            */
    uint32_t cols, rows;           /* AIE array                              */
    uint32_t core_rows, mem_rows, shim_rows;
    uint32_t col_size;             /* bytes of one column's address space    */
};
bool het_npu_get_hw_info(const het_device *dev, struct het_npu_hw_info *out);

/* Put repacked weights prepared from now on in pool (NULL: aligned host
 * memory). Set it before prepare_weights; not owned. false if not an NPU. */
bool het_npu_set_pool(het_device *dev, struct het_pool *pool);

/* Hardware mode: fill a pool NPU-backing provider (pool.h backing 1) that
 * allocates amdxdna BOs and exports them as dma-bufs. false in emulation. */
struct het_pool_npu_provider;
bool het_npu_pool_provider(het_device *dev, struct het_pool_npu_provider *out);

#ifdef __cplusplus
}
#endif
#endif /* HET_NPU_H */
