/*
 * pool.h — the one memory pool that every device maps.
 *
 * On a Ryzen AI machine the CPU, iGPU and NPU share DRAM, so het keeps every
 * tensor (weights, KV cache, activations) in a single region reserved once at
 * start-up. Each device imports the whole region once (as a dma-buf fd, or as
 * a host pointer + size) and then addresses tensors by their offset in it, so
 * handing a tensor from one device to another costs a fence and cache
 * maintenance (het_pool_sync_begin/end), never a copy.
 *
 * The pool carves slices {offset, size} out of the region with a coalescing
 * best-fit sub-allocator whose metadata lives outside the region (the region
 * itself is never touched by the allocator, so pages materialise only when a
 * tensor is written). Every offset is a multiple of the pool's granule
 * (>= 4096 and >= every device's alignment requirement, passed as min_align).
 *
 * Backing, tried in this order unless the caller gives another:
 *   1. HET_POOL_BACKING_NPU     an NPU-owned buffer exported as a dma-buf; the
 *                               NPU backend supplies it through params.npu.
 *   2. HET_POOL_BACKING_DMAHEAP a dma-buf from /dev/dma_heap/system.
 *   3. HET_POOL_BACKING_UDMABUF a dma-buf made by /dev/udmabuf over a sealed
 *                               memfd.
 *   4. HET_POOL_BACKING_MEMFD   a plain sealed memfd (not a dma-buf).
 * Why each skipped backing was skipped is kept (het_pool_skip_reason) and
 * shown by het_pool_describe. All calls are thread-safe.
 */
#ifndef HET_POOL_H
#define HET_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HET_POOL_MIN_ALIGN 4096u

enum het_pool_backing {
    HET_POOL_BACKING_NONE    = 0,
    HET_POOL_BACKING_NPU     = 1,  /* "amdxdna bo"                 */
    HET_POOL_BACKING_DMAHEAP = 2,  /* "dma-heap system"            */
    HET_POOL_BACKING_UDMABUF = 3,  /* "udmabuf"                    */
    HET_POOL_BACKING_MEMFD   = 4,  /* "memfd (not a dma-buf)"      */
    HET_POOL_BACKING_COUNT,
};

/* The NPU backend's side of backing 1. export_dmabuf allocates a buffer of
 * exactly size bytes that the NPU can use and returns it exported as a dma-buf
 * fd (the pool owns the fd from then on and closes it), or returns -1 with
 * err filled ("amdxdna: /dev/accel/accel0: ..."); the pool then falls back to
 * the next backing. After a successful export, release (when set) is called
 * exactly once, after the pool has unmapped the buffer and closed the fd:
 * at het_pool_free, or at once when the pool rejects the fd (not a dma-buf,
 * too small, mmap refused), so the backend can drop its own BO handle last. */
struct het_pool_npu_provider {
    int  (*export_dmabuf)(void *ctx, size_t size, het_error *err);
    void (*release)(void *ctx);
    void *ctx;
};

struct het_pool_params {
    size_t size;          /* bytes to reserve; rounded up to the granule        */
    size_t min_align;     /* power of two; 0 = 4096. The granule is the largest
                             of this, 4096 and the page size.                    */
    /* Backings to try, in order; n_order == 0 means the default order
     * NPU, DMAHEAP, UDMABUF, MEMFD. One entry forces that backing. */
    enum het_pool_backing order[HET_POOL_BACKING_COUNT];
    int    n_order;
    struct het_pool_npu_provider npu;   /* export_dmabuf NULL: no NPU backing */
    const char *dma_heap_path;          /* NULL = "/dev/dma_heap/system"      */
    const char *udmabuf_path;           /* NULL = "/dev/udmabuf"              */
    const char *name;                   /* memfd / dma-buf name; NULL = "het-pool" */
    bool   hugepages;                   /* madvise(MADV_HUGEPAGE), best effort */
    /* Fault injection for tests: when > 0, the first fault_after_allocs calls to
     * het_pool_alloc behave normally and every later one fails with
     * HET_ERR_NOMEM, leaving the pool unchanged. When 0, the environment
     * variable HET_POOL_FAULT=N (N >= 0) has the same effect. See also
     * het_pool_set_fault. */
    int    fault_after_allocs;
};

/* A piece of the pool. size is what the caller owns: the request rounded up
 * to the granule. */
struct het_slice {
    size_t offset;
    size_t size;
};

struct het_pool_stats {
    size_t   reserved;        /* pool size in bytes                               */
    size_t   granule;         /* every offset and size is a multiple of this       */
    size_t   used;            /* bytes in live slices                              */
    size_t   peak;            /* highest `used` seen                               */
    size_t   free_bytes;      /* reserved - used                                   */
    size_t   largest_free;    /* largest single free block                         */
    double   fragmentation;   /* 1 - largest_free / free_bytes (0 when nothing free) */
    uint64_t n_allocs;        /* live slices                                       */
    uint64_t n_free_blocks;   /* free blocks (after coalescing)                    */
    uint64_t total_allocs;    /* successful het_pool_alloc calls                   */
    uint64_t failed_allocs;   /* refused het_pool_alloc calls                      */
    uint64_t n_syncs;         /* het_pool_sync_begin/end calls that reached a dma-buf */
    uint64_t copied_bytes;    /* reported by devices through het_pool_count_copy   */
    uint64_t n_copies;
};

typedef struct het_pool het_pool;

/* Reserve the region (lazily for memfd/udmabuf: pages appear on first touch)
 * and map it MAP_SHARED, 2 MiB-aligned when possible. NULL on error, with err
 * naming every backing that was tried and why it failed. */
het_pool *het_pool_init(const struct het_pool_params *params, het_error *err);
void      het_pool_free(het_pool *pool);   /* NULL is a no-op */

/* Carve a slice of at least size bytes whose offset is a multiple of align
 * (a power of two; 0 = the granule; smaller values are raised to it).
 * HET_ERR_INVALID for size 0 or a bad alignment, HET_ERR_NOMEM when it does
 * not fit (the message gives the request, largest free block and free bytes).
 * On any error *out is {0, 0} and the pool is unchanged. */
enum het_status het_pool_alloc(het_pool *pool, size_t size, size_t align, struct het_slice *out,
                               het_error *err);
/* het_pool_alloc, then every byte of the slice reads as zero: a memfd or
 * udmabuf slice that no earlier slice overlapped is zero already (its pages
 * have never been written, so none is touched now); any other is cleared
 * with memset inside a WRITE sync bracket. */
enum het_status het_pool_alloc_zeroed(het_pool *pool, size_t size, size_t align, struct het_slice *out,
                                      het_error *err);
/* Give a slice back; neighbouring free blocks are merged. HET_ERR_INVALID
 * (pool unchanged) when slice is not a live slice of this pool (double
 * release, wrong size). */
enum het_status het_pool_release(het_pool *pool, struct het_slice slice, het_error *err);

/* Host address of a pool offset; NULL when offset >= size. */
void  *het_pool_ptr(const het_pool *pool, size_t offset);
/* Offset of a host address inside the pool; false when ptr is outside it. */
bool   het_pool_offset_of(const het_pool *pool, const void *ptr, size_t *offset);
void  *het_pool_base(const het_pool *pool);
size_t het_pool_size(const het_pool *pool);
size_t het_pool_granule(const het_pool *pool);

enum het_pool_backing het_pool_backing(const het_pool *pool);
/* "amdxdna bo", "dma-heap system", "udmabuf", "memfd (not a dma-buf)", "none" */
const char *het_pool_backing_name(enum het_pool_backing b);
/* Short names for command lines: "npu", "dmaheap", "udmabuf", "memfd". */
const char *het_pool_backing_short_name(enum het_pool_backing b);
/* Parse "memfd" or a comma list "dmaheap,memfd" (short or long names,
 * "auto" = the default order) into params->order / n_order. */
enum het_status het_pool_parse_order(const char *list, struct het_pool_params *params, het_error *err);

/* The fd whose mmap gives the pool's pages: the memfd for the memfd and
 * udmabuf backings, the dma-buf otherwise. Owned by the pool. */
int het_pool_fd(const het_pool *pool);
/* The dma-buf fd a device imports (Vulkan VK_EXT_external_memory_dma_buf,
 * amdxdna import), or -1 for the memfd backing, whose devices import the
 * host pointer instead (VK_EXT_external_memory_host). Owned by the pool. */
int het_pool_dmabuf_fd(const het_pool *pool);

/* Why backing b was skipped while choosing ("/dev/udmabuf: No such file or
 * directory"), or NULL when b was not tried or is the one in use. */
const char *het_pool_skip_reason(const het_pool *pool, enum het_pool_backing b);
/* One line for `hetrun devices` / --stats:
 * "pool 1.00 GiB, memfd (not a dma-buf), granule 4096; skipped: udmabuf (/dev/udmabuf: ...)" */
void het_pool_describe(const het_pool *pool, char *buf, size_t cap);

void het_pool_get_stats(const het_pool *pool, struct het_pool_stats *out);
/* One line: reserved, used, peak, live slices, largest free, fragmentation, copies. */
void het_pool_format_stats(const struct het_pool_stats *st, char *buf, size_t cap);
/* Devices call this whenever they copy bytes that the pool was meant to spare
 * them (staging buffers, bounce copies), so --stats shows the real count. */
void het_pool_count_copy(het_pool *pool, size_t bytes);

/* Re-arm fault injection: the next n_ok allocations succeed, then all fail
 * (HET_ERR_NOMEM) until re-armed; n_ok < 0 disarms. */
void het_pool_set_fault(het_pool *pool, long n_ok);

/* CPU access brackets around a slice. For dma-buf backings they issue
 * DMA_BUF_IOCTL_SYNC (START/END with READ, WRITE or both), which performs the
 * cache maintenance the importing devices need; the ioctl acts on the whole
 * buffer, the slice is checked for bounds and documents intent. For the memfd
 * backing they are no-ops. */
enum het_pool_sync {
    HET_POOL_SYNC_READ  = 1,
    HET_POOL_SYNC_WRITE = 2,
    HET_POOL_SYNC_RW    = 3,
};
enum het_status het_pool_sync_begin(het_pool *pool, struct het_slice slice, enum het_pool_sync access,
                                    het_error *err);
enum het_status het_pool_sync_end(het_pool *pool, struct het_slice slice, enum het_pool_sync access,
                                  het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_POOL_H */
