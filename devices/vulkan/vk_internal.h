/*
 * vk_internal.h — shared state of the Vulkan backend (internal).
 *
 * One het_vk_ctx per opened device holds the Vulkan objects, the registered
 * host memory regions, the pipeline cache and the split being encoded.
 * Work flows: supports_op (vk_support.c) -> run_split encodes each node into
 * dispatch records (vk_encode*.c) that name their buffers through
 * het_vk_bind_span (vk_memory.c) -> vk_exec.c records one command buffer
 * (uploads, dispatches with barriers, timestamps, downloads), submits it
 * once with a fence, and sync waits on that fence.
 *
 * Shader interface (shaders/common.glsl): every kernel sees four storage
 * buffers, bindings 0..2 sources and 3 destination, addressed in bytes
 * through uint words; shapes, byte strides and offsets travel as push
 * constants; workgroup size is specialization constant 0 and the kernel's
 * variant (operation or weight type) constant 1. The row kernels of
 * CPU-type devices also read two of their sources through uniform texel
 * buffers (bindings 4, 5: RGBA32UI views of the same ranges), whose fetches
 * such drivers gather far faster than storage-buffer loads.
 */
#ifndef HET_VK_INTERNAL_H
#define HET_VK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "het/pool.h"
#include "het/vulkan.h"
#include "sched/device_impl.h"

/* ---- options (tests use them to force paths a device would not take) ---- */
struct het_vk_options {
    uint64_t max_bind;    /* 0: device limit; else cap on one descriptor's range       */
    uint64_t max_alloc;   /* 0: device limit; else cap on one allocation (region chunk) */
    bool     no_import;   /* mirror every region in device memory (explicit copies)   */
    bool     no_subgroup; /* shared-memory reductions even where subgroups work        */
    bool     no_gemm;     /* mul_mat with M > 8 as GEMV column windows (small devices) */
    bool     no_rows;     /* never the row-per-invocation kernels of CPU-type devices */
    bool     own_memory;  /* act as a discrete device: weights uploaded, not imported */
    bool     refuse_probe;/* the import probe fails: the device is re-created without import */
};
het_device *het_vk_device_init_opts(int index, const struct het_vk_options *opt, het_error *err);

/* ---- element types the kernels read ------------------------------------- */
struct het_vk_type {
    enum het_type type;
    uint32_t      blck;  /* elements per block                */
    uint32_t      bytes; /* bytes per block                   */
};
/* NULL when no kernel reads this type. */
const struct het_vk_type *het_vk_type_get(enum het_type type);
bool het_vk_type_is_weight(enum het_type type); /* F32 F16 Q4_0 Q8_0 Q4_K Q6_K */

/* ---- kernels -------------------------------------------------------------- */
enum het_vk_kernel {
    HET_VK_K_ADD = 0, /* eltwise.comp, op 0..6 in this order; variant: F16 bits (types) */
    HET_VK_K_MUL,
    HET_VK_K_SWIGLU,
    HET_VK_K_SCALE,
    HET_VK_K_SILU,
    HET_VK_K_DIV,
    HET_VK_K_SIGMOID,
    HET_VK_K_COPY,        /* variant: F16 bits (types) */
    HET_VK_K_RMS_NORM,
    HET_VK_K_SOFTMAX,
    HET_VK_K_ROPE,
    HET_VK_K_ATTN,
    HET_VK_K_GET_ROWS,    /* variant: src0 type */
    HET_VK_K_MUL_MAT_VEC, /* variant: src0 type */
    HET_VK_K_MUL_MAT,     /* variant: src0 type */
    HET_VK_K_MUL_MAT_ROWS1, /* CPU-type devices, one column; variant: src0 type */
    HET_VK_K_MUL_MAT_ROWSN, /* CPU-type devices, several columns; variant: src0 type */
    HET_VK_K_ATTN_ROWS,     /* CPU-type devices; variant: head size / 32 - 1, +8 for F16 K/V */
    HET_VK_K_RMS_NORM_ROWS, /* CPU-type devices: one subgroup per row */
    HET_VK_K_MUL_MAT_VEC_ID, /* MUL_MAT_ID, a GEMV per (slot, token); variant: src0 type */
    HET_VK_K_TOP_K,          /* expert routing (vk_encode_moe.c) */
    HET_VK_K_SUM_ROWS,
    HET_VK_K_MOE_SUM,
    HET_VK_K_MOE_GROUP,      /* MUL_MAT_ID prefill: token-slot pairs grouped by expert */
    HET_VK_K_MUL_MAT_ID,     /* MUL_MAT_ID prefill: a tiled GEMM per expert; variant: src0 type */
    HET_VK_K_MUL_MAT_ID_ROWS, /* the same on CPU-type devices (mul_mat_rows.glsl); variant: src0 type */
    HET_VK_K_COUNT
};
#define HET_VK_N_TYPES  31 /* HET_TYPE_COUNT: pipeline table width */
#define HET_VK_ATTN_MAX_HD 256
#define HET_VK_GEMV_MAX_COLS 8 /* mul_mat_vec handles M <= this */
#define HET_VK_GEMV_ROWS 4     /* output rows per mul_mat_vec workgroup (ROWS in the shader) */
#define HET_VK_GEMM_TILE 64    /* mul_mat output tile (BN = BM)   */
#define HET_VK_GEMM_WG   256
#define HET_VK_GEMM_SHARED (2 * 64 * 33 * 4) /* bytes of shared memory mul_mat.comp uses */
/* mul_mat_rows*.comp: output rows per invocation (R) and columns per pass (TM) */
#define HET_VK_ROWS1_R   8
#define HET_VK_ROWSN_R   8
#define HET_VK_ROWSN_TM  8
/* grouped MUL_MAT_ID (moe_group.comp, mul_mat_id.comp) */
#define HET_VK_MOE_MAX_E 1024 /* experts the grouping pass counts in shared memory (MAX_E) */
#define HET_VK_MOE_TILES_AT 4 /* scratch word of the first column tile (TILES_AT) */
#define HET_VK_MOE_GEMV_MAX_PAIRS 8 /* GPU kernels: k*T token-slot pairs up to this run a GEMV per pair */
#define HET_VK_MOE_ROWS_TILE 8 /* pairs per column tile of mul_mat_id_rows.comp (its TM) */

/* ---- one descriptor and one queued dispatch ------------------------------- */
#define HET_VK_N_BIND    4
#define HET_VK_N_TEXEL   2  /* texel-buffer bindings HET_VK_N_BIND.. (row kernels) */
#define HET_VK_PUSH_WORDS 32 /* 128 bytes, the guaranteed minimum */

/* buf VK_NULL_HANDLE: the split's scratch buffer (ctx->scratch, sized at submit). */
struct het_vk_bind {
    VkBuffer     buf;
    VkDeviceSize offset, range;
};

/* A tensor operand as a kernel sees it: the descriptor plus the byte offset
 * of the operand's first element inside the bound range. */
struct het_vk_operand {
    struct het_vk_bind bind;
    uint32_t           off;
    VkDeviceSize       room;  /* bytes of the buffer past the range (a texel view may extend into them) */
};

struct het_vk_dispatch {
    VkPipeline         pipe;
    struct het_vk_bind bind[HET_VK_N_BIND];
    VkBufferView       tview[HET_VK_N_TEXEL]; /* VK_NULL_HANDLE: binding unused */
    uint32_t           push[HET_VK_PUSH_WORDS];
    uint32_t           push_size; /* bytes */
    uint32_t           groups[3];
    int                node;      /* index of the node in the split */
    bool               after_prev; /* waits for the node's previous dispatch (a barrier) */
};

/* A mirrored span to copy host->device before the split or device->host after. */
struct het_vk_xfer {
    VkBuffer     buf;
    VkDeviceSize dev_off;
    uint8_t     *host;
    size_t       size;
    size_t       staging_off;
};

struct het_vk_span {
    const uint8_t *lo;
    size_t         size;
};

/* ---- registered host memory ------------------------------------------------ */
struct het_vk_chunk {
    VkDeviceMemory mem;
    VkBuffer       buf;
    size_t         start; /* offset from the region's aligned base */
    size_t         size;
};

struct het_vk_region {
    uint8_t             *base;  /* as registered                              */
    size_t               size;
    uint8_t             *abase; /* base rounded down to the import alignment  */
    size_t               asize; /* covers [base, base+size) from abase        */
    enum het_memory_kind kind;
    bool                 imported; /* else mirrored: explicit copies           */
    VkDeviceMemory       dmabuf_mem; /* a dma-buf import every chunk's buffer is bound into, else none */
    size_t               stride;   /* chunk k starts at k*stride               */
    int                  n_chunks;
    struct het_vk_chunk *chunks;
};

/* ---- the split being encoded / in flight ---------------------------------- */
struct het_vk_split {
    struct het_vk_dispatch   *disp;
    int                       n_disp, cap_disp;
    struct het_vk_xfer       *up, *down;
    int                       n_up, cap_up, n_down, cap_down;
    struct het_vk_span       *written; /* mirrored spans written so far */
    int                       n_written, cap_written;
    size_t                    staging_need;
    size_t                    scratch_need; /* bytes of device scratch one node uses at most */
    int                       n_nodes;
    struct het_vulkan_op_time *prof;   /* per node when profiling       */
    int                       cap_prof;
    VkBufferView             *views;   /* texel views the split uses    */
    int                       n_views, cap_views;
    bool                      timed;   /* timestamps were recorded      */
};

struct het_vk_ctx {
    het_device                   *dev;   /* back pointer for stats           */
    struct het_vk_options         opt;
    struct het_vulkan_device_info info;

    VkInstance       instance;
    VkPhysicalDevice phys;
    VkDevice         device;
    VkQueue          queue;
    uint32_t         qfamily;
    VkPhysicalDeviceMemoryProperties memprops;
    PFN_vkGetMemoryHostPointerPropertiesEXT get_host_ptr_props;
    PFN_vkGetMemoryFdPropertiesKHR          get_fd_props;   /* dma-buf import, when enabled */

    /* limits and capabilities in force */
    uint64_t max_bind;      /* one descriptor's range (<= 4 GiB - 4)             */
    uint64_t max_alloc;     /* one allocation                                    */
    uint64_t min_align;     /* storage buffer offset alignment (>= 4)            */
    uint64_t import_align;  /* minImportedHostPointerAlignment                   */
    uint64_t max_span;      /* largest operand span bindable in one descriptor  */
    uint32_t max_groups[3];
    uint32_t max_wg;        /* workgroup invocations (and x size) allowed        */
    bool     gemm_ok;       /* the 256-invocation, 17 KB-shared GEMM kernel fits */
    bool     import_ok;     /* external_memory_host usable (and its probe passed) */
    bool     import_refused;/* the driver has the extension but refused the probe */
    bool     own_memory;    /* discrete: device memory is not the host's: weights
                               are uploaded once, not read across the bus        */
    bool     dmabuf_ok;     /* external_memory_dma_buf (+ _fd) enabled            */
    bool     use_subgroup;  /* subgroup arithmetic kernels                        */
    bool     use_rows;      /* row-per-invocation kernels (CPU-type devices)      */
    uint64_t texel_align;   /* minTexelBufferOffsetAlignment                      */
    uint64_t texel_max;     /* maxTexelBufferElements                             */
    bool     timestamps;
    double   ts_period_ns;
    uint64_t ts_mask;

    /* pipelines */
    VkDescriptorSetLayout dsl;
    VkPipelineLayout      layout;
    VkShaderModule        modules[HET_VK_K_COUNT];
    VkPipeline            pipes[HET_VK_K_COUNT][HET_VK_N_TYPES];

    /* execution */
    VkCommandPool     cpool;
    VkCommandBuffer   cmd;
    VkFence           fence;
    bool              in_flight;
    bool              lost;
    VkDescriptorPool *dpools;
    int               n_dpools, cur_dpool;
    VkBuffer          dummy;
    VkDeviceMemory    dummy_mem;
    VkBuffer          staging;
    VkDeviceMemory    staging_mem;
    uint8_t          *staging_map;
    size_t            staging_size;
    VkBuffer          scratch;      /* device-only working memory of kernels (grouped MUL_MAT_ID) */
    VkDeviceMemory    scratch_mem;
    size_t            scratch_size;
    VkQueryPool       qpool;
    uint32_t          qpool_cap;

    struct het_vk_region *regions;
    int                   n_regions, cap_regions;

    struct het_vk_split split;

    /* profiling */
    bool                       profiling;
    struct het_vulkan_op_time *records;
    int                        n_records, cap_records;
};

static inline struct het_vk_ctx *het_vk_ctx_of(het_device *dev) { return (struct het_vk_ctx *)dev->context; }

/* ---- vk_instance.c --------------------------------------------------------- */
enum het_status het_vk_status(VkResult r);
const char     *het_vk_result_str(VkResult r);
/* Set err from a failed Vulkan call: "<what>: VK_ERROR_...". Marks the
 * context lost on VK_ERROR_DEVICE_LOST when ctx is given. */
enum het_status het_vk_fail(struct het_vk_ctx *ctx, VkResult r, het_error *err, const char *what);
enum het_status het_vk_instance_create(VkInstance *out, het_error *err);
void het_vk_info_fill(VkInstance inst, VkPhysicalDevice pd, int index, struct het_vulkan_device_info *info);
/* Policy pick among n infos: integrated, discrete, CPU, other; -1 if none usable. */
int  het_vk_policy_pick(const struct het_vulkan_device_info *infos, int n);
/* Queue family with compute, preferring one with timestamps; -1 if none. */
int  het_vk_compute_family(VkPhysicalDevice pd, bool *timestamps);

/* ---- vk_context.c ---------------------------------------------------------- */
enum het_status het_vk_ctx_open(struct het_vk_ctx *ctx, int index, het_error *err);
void            het_vk_ctx_close(struct het_vk_ctx *ctx);
/* Memory type index with all `want` bits among `bits`, preferring `prefer`; -1 none. */
int             het_vk_memtype(const struct het_vk_ctx *ctx, uint32_t bits, VkMemoryPropertyFlags want,
                               VkMemoryPropertyFlags prefer);
enum het_status het_vk_buffer_alloc(struct het_vk_ctx *ctx, VkDeviceSize size, VkMemoryPropertyFlags want,
                                    VkMemoryPropertyFlags prefer, VkBuffer *buf, VkDeviceMemory *mem,
                                    void **map, het_error *err);
void            het_vk_buffer_release(struct het_vk_ctx *ctx, VkBuffer *buf, VkDeviceMemory *mem);
/* Usage flags of every buffer kernels bind (texel views where the row kernels run). */
VkBufferUsageFlags het_vk_buffer_usage(const struct het_vk_ctx *ctx);

/* ---- vk_memory.c ------------------------------------------------------------ */
enum het_status het_vk_region_add(struct het_vk_ctx *ctx, void *base, size_t size, enum het_memory_kind kind,
                                  het_error *err);
void            het_vk_region_remove(struct het_vk_ctx *ctx, void *base);
/* The whole pool as one region: its dma-buf imported when the pool has one
 * and the device takes dma-bufs, else its pages (host pointer), else a
 * mirror with counted copies. Says which in ctx->dev->pool_import. */
enum het_status het_vk_pool_add(struct het_vk_ctx *ctx, het_pool *pool, het_error *err);
/* Import one page of private anonymous memory and free it again: false when
 * the driver refuses (some refuse every private mapping, and then refuse
 * plain allocations too until the device is re-created). */
bool het_vk_import_probe(struct het_vk_ctx *ctx);
void            het_vk_regions_free(struct het_vk_ctx *ctx);
/* Bind [lo, lo+size) for a kernel. In mirrored regions a read queues an
 * upload (unless this split already wrote the span) and a write queues a
 * download (plus an upload when `gaps`: the write leaves bytes untouched). */
enum het_status het_vk_bind_span(struct het_vk_ctx *ctx, const uint8_t *lo, size_t size, bool write, bool gaps,
                                 struct het_vk_operand *op, het_error *err);
/* Staging buffer of at least size bytes (host visible, coherent). */
enum het_status het_vk_staging_reserve(struct het_vk_ctx *ctx, size_t size, het_error *err);
/* Scratch buffer of at least size bytes (device memory; no split in flight).
 * Nodes are separated by barriers, so every node of a split may use all of it. */
enum het_status het_vk_scratch_reserve(struct het_vk_ctx *ctx, size_t size, het_error *err);

/* ---- vk_pipeline.c ---------------------------------------------------------- */
enum het_status het_vk_pipelines_init(struct het_vk_ctx *ctx, het_error *err);
void            het_vk_pipelines_free(struct het_vk_ctx *ctx);
/* Created on first use, then cached. type is the variant of typed kernels. */
enum het_status het_vk_pipeline_get(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type type,
                                    VkPipeline *out, het_error *err);
/* Workgroup size of kernel k on this device. */
uint32_t        het_vk_kernel_wg(const struct het_vk_ctx *ctx, enum het_vk_kernel k);

/* ---- vk_support.c ------------------------------------------------------------ */
bool   het_vk_supports(const struct het_vk_ctx *ctx, const struct het_tensor *node);
/* Host address of t's element 0 (follows view chains); NULL if unallocated. */
uint8_t *het_vk_tensor_addr(const struct het_tensor *t);
/* Bytes from element 0 to one past the last byte (any strides); 0 if empty. */
size_t het_vk_tensor_span(const struct het_tensor *t);
/* Dense standard layout (no gaps inside the span). */
bool   het_vk_tensor_dense(const struct het_tensor *t);
bool   het_vk_type_is_float(enum het_type t); /* F32 or F16 */

/* ---- vk_encode.c / vk_encode_mm.c / vk_encode_moe.c -------------------------------------------- */
/* Append node's dispatches to ctx->split. */
enum het_status het_vk_encode_node(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err);
enum het_status het_vk_encode_mul_mat(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err);
enum het_status het_vk_encode_get_rows(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err);
enum het_status het_vk_encode_mul_mat_id(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err);
/* TOP_K, SUM_ROWS, MOE_SUM: the routing ops of a mixture-of-experts layer */
enum het_status het_vk_encode_moe_route(struct het_vk_ctx *ctx, struct het_tensor *node, int idx, het_error *err);
/* Queue one dispatch of kernel k with groups[3] workgroups; push is copied. */
enum het_status het_vk_emit(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type variant, int node,
                            const struct het_vk_operand *const ops[HET_VK_N_BIND], const void *push,
                            size_t push_size, const uint32_t groups[3], het_error *err);
/* Lay out `total` workgroups over x and y (kernels use group_id()). */
enum het_status het_vk_flat_groups(const struct het_vk_ctx *ctx, uint64_t total, uint32_t groups[3],
                                   het_error *err);
/* het_vk_emit, with texel views for bindings 4, 5 (NULL entries: unused). */
enum het_status het_vk_emit_views(struct het_vk_ctx *ctx, enum het_vk_kernel k, enum het_type variant, int node,
                                  const struct het_vk_operand *const ops[HET_VK_N_BIND],
                                  const VkBufferView tview[HET_VK_N_TEXEL], const void *push, size_t push_size,
                                  const uint32_t groups[3], het_error *err);
/* Whether op's range can be viewed as RGBA32UI texels (offset, size limits). */
bool            het_vk_texel_ok(const struct het_vk_ctx *ctx, const struct het_vk_operand *op);
/* An RGBA32UI view of op's range (its size from het_vk_texel_range), kept
 * until the split has run. */
enum het_status het_vk_texel_view(struct het_vk_ctx *ctx, const struct het_vk_operand *op, VkBufferView *out,
                                  het_error *err);
/* The byte size of a texel view of `range` bytes followed by `room` bytes
 * of its buffer, at most texel_max texels: range rounded up to a 16-byte
 * texel, then 256 bytes more where bits 8..15 of that are zero and the
 * buffer has the room. Mesa's llvmpipe (lavapipe) keys the machine code of
 * a kernel on those bits of each bound texel buffer's size (they overlay a
 * texture's last mip level: zero reads as "level zero only"), so two
 * views whose sizes differ only there (16 KiB and 64 KiB of activations)
 * compile the same kernel twice, seconds each for the row kernels. */
VkDeviceSize    het_vk_texel_range(VkDeviceSize range, VkDeviceSize room, uint64_t texel_max);
/* Whether the row-per-invocation kernels (mul_mat_rows.glsl) can read
 * weights a and activations b through these operands (vk_encode_mm.c). */
bool            het_vk_rows_fit(const struct het_vk_ctx *ctx, const struct het_tensor *a, const struct het_tensor *b,
                                const struct het_vk_operand *oa, const struct het_vk_operand *ob);
/* Bind tensor t (its whole span) as an operand. */
enum het_status het_vk_bind_tensor(struct het_vk_ctx *ctx, const struct het_tensor *t, bool write,
                                   struct het_vk_operand *op, het_error *err);

/* ---- vk_exec.c ---------------------------------------------------------------- */
enum het_status het_vk_split_begin(struct het_vk_ctx *ctx, int n_nodes, het_error *err);
enum het_status het_vk_split_submit(struct het_vk_ctx *ctx, het_error *err);
/* Wait for the split in flight (if any), copy mirrored outputs back, collect
 * timestamps. */
enum het_status het_vk_wait(struct het_vk_ctx *ctx, het_error *err);
void            het_vk_split_free(struct het_vk_split *s);
/* Destroy the texel views of the last split (it must have completed). */
void            het_vk_views_release(struct het_vk_ctx *ctx);

#endif /* HET_VK_INTERNAL_H */
