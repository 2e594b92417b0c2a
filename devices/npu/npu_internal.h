/*
 * npu_internal.h — the NPU device's private state, shared by its files:
 * npu_device.c (vtable, init), npu_weights.c (registry of repacked
 * weights), npu_cache.c (on-disk repack cache), npu_ring.c (staging ring),
 * npu_exec.c (running a MUL_MAT) and npu_hw.c (the amdxdna executor).
 */
#ifndef HET_NPU_INTERNAL_H
#define HET_NPU_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/npu/npu_kernel.h"
#include "devices/npu/npu_layout.h"
#include "het/npu.h"
#include "het/pool.h"
#include "sched/device_impl.h"

#define NPU_WREC_MAGIC 0x4E505557u   /* "NPUW" */

/* One repacked weight tensor. t->extra of the source tensor points here. */
struct npu_wrec {
    uint32_t              magic;
    const het_device     *owner;
    struct het_npu_wdesc  d;
    uint8_t              *data;        /* d.total_bytes of NPU layout                 */
    /* where data lives */
    bool                  in_pool;     /* a slice of ctx->pool                         */
    bool                  mapped;      /* points into the cache file mapping           */
    struct het_slice      slice;
    bool                  resident;    /* counted against the pin budget; else streamed */
    bool                  rejected;    /* the layout cannot represent it (data NULL)   */
    /* identity of the source: address, type, shape, strides, sampled bytes */
    const void           *src;
    enum het_type         type;
    int64_t               ne[4];
    size_t                nb[4];
    uint64_t              fp;
    char                  name[HET_MAX_NAME];
    struct npu_wrec      *next;        /* registry bucket chain                        */
    /* hardware binding (npu_hw.c) */
    uint32_t              bo;          /* 0: none                                      */
    uint64_t              bo_offset;
};

struct npu_registry {
    struct npu_wrec **buckets;
    size_t            n_buckets;
    size_t            count;
};

/* Two staging slots written in turn; a slot is reused only after the work
 * that read it has completed (token = what the backend waits on). */
struct npu_ring {
    uint8_t  *slot[2];
    size_t    slot_bytes;
    uint64_t  token[2];       /* 0: slot idle                             */
    int       next;
    bool      owned[2];       /* slot memory allocated by the ring         */
    uint64_t  n_acquired;
};

struct npu_cache_file;
struct npu_hw;

struct npu_ctx {
    het_device              *dev;
    struct het_npu_params    params;
    char                     kernel_pack[PATH_MAX];
    char                     cache_dir[PATH_MAX];
    char                     model_key[256];
    struct het_npu_profile   profile;
    struct het_npu_stats     stats;
    struct npu_registry      reg;
    het_pool                *pool;
    size_t                   resident_bytes;
    struct npu_cache_file  **caches;     /* mappings non-resident weights point into */
    int                      n_caches;
    struct npu_ring          ring;
    /* per-matmul scratch (host memory in emulation, BO mappings on hardware) */
    void                    *act;
    size_t                   act_cap;
    float                   *out;
    size_t                   out_cap;
    float                   *row;        /* one gathered activation row          */
    size_t                   row_cap;
    struct npu_hw           *hw;         /* NULL when emulating                  */
};

/* ---- npu_weights.c ---- */
/* Type and shape the layout takes (no data access): supports_op uses it. */
bool            npu_weight_ok(const struct het_tensor *w);
/* Address of a tensor's element 0 (resolving views). */
const void     *npu_tensor_addr(const struct het_tensor *t);
struct npu_wrec *npu_reg_lookup(struct npu_ctx *c, const struct het_tensor *w);
enum het_status npu_weights_prepare(struct npu_ctx *c, struct het_tensor *const *w, int n, het_error *err);
/* The record of w, repacking it now if it was not prepared. */
enum het_status npu_weights_get(struct npu_ctx *c, struct het_tensor *w, struct npu_wrec **out, het_error *err);
void            npu_weights_free_all(struct npu_ctx *c);
/* Sampled fingerprint of a weight's bytes (cheap; detects a different model at the same address). */
uint64_t        npu_weight_fingerprint(const struct het_tensor *w);

/* ---- npu_cache.c ---- */
uint64_t        npu_hash64(const void *p, size_t n, uint64_t seed);
/* ctx->cache_dir resolved (params, $XDG_CACHE_HOME, $HOME) and created. */
enum het_status npu_cache_resolve_dir(struct npu_ctx *c, het_error *err);
enum het_status npu_cache_open(const char *path, uint64_t key, struct npu_cache_file **out, het_error *err);
void            npu_cache_close(struct npu_cache_file *f);
/* Data of the entry matching (name, type, ne, fp) and laid out as d; NULL if absent. */
const void     *npu_cache_find(const struct npu_cache_file *f, const char *name, enum het_type type,
                               const int64_t ne[4], uint64_t fp, const struct het_npu_wdesc *d);
enum het_status npu_cache_write(const char *path, uint64_t key, struct npu_wrec *const *recs, int n,
                                het_error *err);

/* ---- npu_ring.c ---- */
enum het_status npu_ring_init(struct npu_ring *r, size_t slot_bytes, het_error *err);
/* Use caller-provided slot memory (hardware: mapped BOs). */
void            npu_ring_init_external(struct npu_ring *r, void *slot0, void *slot1, size_t slot_bytes);
void            npu_ring_free(struct npu_ring *r);
/* Next slot, after waiting (wait(user, token)) for the work that last read it. */
typedef enum het_status (*npu_ring_wait_fn)(void *user, uint64_t token, het_error *err);
enum het_status npu_ring_acquire(struct npu_ring *r, npu_ring_wait_fn wait, void *user, int *slot,
                                 het_error *err);
void            npu_ring_release(struct npu_ring *r, int slot, uint64_t token);

/* ---- npu_exec.c ---- */
/* int8 activation group of a matmul with this K (32 or K); 0 for bf16. */
int64_t         npu_act_group(const struct npu_ctx *c, int64_t K);
enum het_status npu_exec_matmul(struct npu_ctx *c, struct het_tensor *node, het_error *err);
enum het_status npu_exec_mul_mat_id(struct npu_ctx *c, struct het_tensor *node, het_error *err);
bool            npu_node_ok(const struct npu_ctx *c, const struct het_tensor *node);

/* ---- npu_hw.c (amdxdna) ---- */
enum het_status npu_hw_open(struct npu_ctx *c, het_error *err);
void            npu_hw_close(struct npu_hw *hw);
/* M tile of the compiled kernel for this weight layout, M and activation
 * format and group (npu_act_group) (0: none). */
int64_t         npu_hw_m_tile(const struct npu_hw *hw, const struct het_npu_wdesc *d, int64_t M, enum het_npu_act act,
                              int64_t act_group);
/* Tiles per streamed chunk on hardware: the widest kernel (K, Nc) with
 * Npad % Nc == 0 whose weights fit a staging slot (0: none). */
int64_t         npu_hw_chunk_tiles(const struct npu_hw *hw, const struct het_npu_wdesc *d, int64_t M,
                                   enum het_npu_act act, int64_t act_group, size_t slot_bytes);
/* False after a timeout, a lost device or a failed self-check. */
bool            npu_hw_usable(const struct npu_hw *hw);
enum het_status npu_hw_register(struct npu_hw *hw, void *base, size_t size, het_error *err);
void            npu_hw_unregister(struct npu_hw *hw, void *base);
/* Make a resident weight reachable by the NPU (BO + offset). */
enum het_status npu_hw_bind_weight(struct npu_hw *hw, struct npu_wrec *w, het_error *err);
/* Scratch for one kernel call: activation and output buffers the NPU can read/write. */
enum het_status npu_hw_io(struct npu_hw *hw, size_t act_bytes, size_t out_bytes, void **act, float **out,
                          het_error *err);
/* Submit one kernel call: weights laid out as d, host view host_plane, at
 * (bo, bo_off) or in ring slot `slot` (>= 0); activations a and output out
 * (row stride ldo) inside the buffers npu_hw_io gave. *token: what to wait on. */
enum het_status npu_hw_run(struct npu_hw *hw, const struct het_npu_wdesc *d, const void *host_plane, uint32_t bo,
                           uint64_t bo_off, int slot, const struct het_npu_actbuf *a, float *out, size_t ldo,
                           uint64_t *token, het_error *err);
enum het_status npu_hw_wait(void *hw, uint64_t token, het_error *err);
bool            npu_hw_get_info(const struct npu_hw *hw, struct het_npu_hw_info *out);
bool            npu_hw_pool_provider(struct npu_hw *hw, struct het_pool_npu_provider *out);
/* Staging slots for the ring (mapped shared BOs). */
enum het_status npu_hw_staging(struct npu_hw *hw, size_t slot_bytes, void **slot0, void **slot1, het_error *err);

#endif /* HET_NPU_INTERNAL_H */
