/*
 * vulkan.h — the Vulkan compute device (public view).
 *
 * Discovery lists every Vulkan physical device with what het needs to know
 * about it (type, driver, memory heaps, subgroup size, the optional features
 * het uses). het_vulkan_device_init() opens one as a het_device that the
 * scheduler drives through the common device interface. Profiling (GPU
 * timestamps per node) is the one Vulkan-specific control.
 *
 * Every call returns errors (HET_ERR_NO_DEVICE when there is no usable
 * device, HET_ERR_NOMEM when device memory runs out, HET_ERR_DEVICE_LOST
 * when the driver loses the device); nothing prints or aborts.
 */
#ifndef HET_VULKAN_H
#define HET_VULKAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/device.h"
#include "het/graph.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum het_vulkan_device_type {
    HET_VULKAN_TYPE_OTHER      = 0,
    HET_VULKAN_TYPE_INTEGRATED = 1, /* shares system memory (Ryzen AI iGPU) */
    HET_VULKAN_TYPE_DISCRETE   = 2,
    HET_VULKAN_TYPE_VIRTUAL    = 3,
    HET_VULKAN_TYPE_CPU        = 4, /* software rasteriser (Mesa lavapipe)  */
};

#define HET_VULKAN_MAX_HEAPS 16

struct het_vulkan_heap {
    uint64_t size;         /* bytes                                  */
    bool     device_local; /* VK_MEMORY_HEAP_DEVICE_LOCAL_BIT         */
};

struct het_vulkan_device_info {
    int                          index;            /* argument for het_vulkan_device_init       */
    char                         name[256];        /* "AMD Radeon 890M (RADV GFX1150)"          */
    enum het_vulkan_device_type  type;
    uint32_t                     vendor_id, device_id;
    uint32_t                     api_version;      /* VK_MAKE_API_VERSION packed                */
    char                         driver_name[256]; /* "radv", "llvmpipe", "NVIDIA"              */
    char                         driver_info[256]; /* "Mesa 24.1.0", ...                        */
    uint32_t                     driver_version;   /* vendor-specific packing                   */
    int                          n_heaps;
    struct het_vulkan_heap       heaps[HET_VULKAN_MAX_HEAPS];
    uint32_t                     subgroup_size;
    bool                         subgroup_arithmetic; /* subgroupAdd/Max usable in compute      */
    bool                         storage_16bit;     /* storageBuffer16BitAccess (reported only) */
    bool                         external_memory_host; /* zero-copy import of host pages        */
    bool                         dma_buf;           /* VK_EXT_external_memory_dma_buf           */
    bool                         timestamps;        /* compute queue timestamps (profiling)     */
    uint64_t                     max_storage_buffer_range;
    uint64_t                     max_allocation_size;
    bool                         usable;            /* Vulkan >= 1.2 with a compute queue       */
};

/* Number of Vulkan physical devices (0 when there is no driver at all). */
int het_vulkan_device_count(het_error *err);

/* Fill up to max entries; *n_out receives the total number of devices.
 * HET_ERR_NO_DEVICE when the Vulkan loader or every driver is missing. */
enum het_status het_vulkan_device_list(struct het_vulkan_device_info *out, int max, int *n_out, het_error *err);

/* Open device `index` (see het_vulkan_device_list); -1 applies the policy:
 * the first usable integrated GPU, else discrete, else a CPU implementation
 * (lavapipe), else any usable device. NULL with err set on failure. */
het_device *het_vulkan_device_init(int index, het_error *err);

/* Information about an opened device; false when dev is not a Vulkan device. */
bool het_vulkan_device_get_info(const het_device *dev, struct het_vulkan_device_info *out);

/* Whether an opened device reads mapped weights in place (host-pointer
 * import, zero copies) rather than uploading them once into its own memory
 * (a discrete device, or a driver that refused the import probe); false when
 * dev is not a Vulkan device. */
bool het_vulkan_device_imports_weights(const het_device *dev);

/* ---------------------------------------------------------------------------
 * Profiling: with it enabled every node of every split records its GPU time
 * (timestamp queries). Records accumulate until read.                       */

struct het_vulkan_op_time {
    enum het_op op;
    char        name[HET_MAX_NAME]; /* the node's name                      */
    double      gpu_us;             /* GPU execution time, microseconds     */
};

/* HET_ERR_UNSUPPORTED when the queue has no timestamps. */
enum het_status het_vulkan_profiling_enable(het_device *dev, bool enable, het_error *err);
/* Move up to max completed records into out (oldest first); returns how many.
 * Call after het_device_sync. */
int het_vulkan_profiling_read(het_device *dev, struct het_vulkan_op_time *out, int max);

#ifdef __cplusplus
}
#endif
#endif /* HET_VULKAN_H */
