/*
 * graph.h — tensors, views and the compute graph.
 *
 * A het_tensor is metadata: element type, 4-D shape (ne[0] innermost) and
 * byte strides (nb[]), plus the op that produces it. Views (view, reshape,
 * permute, transpose) never copy: they share storage with view_src at
 * view_offs and carry their own strides. Every kernel on every device must
 * honour nb[]; reading a strided view as contiguous is the classic bug.
 *
 * Graph builders (het_mul_mat, het_add, ...) only record nodes; nothing is
 * computed until the scheduler runs the graph on a device set (sched.h).
 * Nodes are appended in topological order because a builder can only
 * reference tensors that already exist.
 */
#ifndef HET_GRAPH_H
#define HET_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"
#include "het/type.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HET_MAX_DIMS      4
#define HET_MAX_SRC       4
#define HET_MAX_OP_PARAMS 16  /* 32-bit words */
#define HET_MAX_NAME      64

enum het_op {
    HET_OP_NONE = 0,   /* leaf: weight, input or persistent state (KV cache)      */
    HET_OP_VIEW,       /* view / reshape / permute / transpose: no computation    */
    HET_OP_GET_ROWS,   /* rows of src0 selected by I32 ids src1 -> F32             */
    HET_OP_MUL_MAT,    /* src0 (K,N) weights/any type x src1 (K,M) F32 -> (N,M)   */
    HET_OP_ADD,        /* src0 + src1 (src1 broadcast over src0)                  */
    HET_OP_MUL,        /* src0 * src1 (src1 broadcast over src0)                  */
    HET_OP_SCALE,      /* src0 * s                                                */
    HET_OP_RMS_NORM,   /* x / sqrt(mean(x^2) + eps) per row                       */
    HET_OP_ROPE,       /* rotary embedding, positions in src1 (I32)               */
    HET_OP_SOFTMAX,    /* softmax(src0 * scale + mask) per row, causal option     */
    HET_OP_SILU,       /* x * sigmoid(x)                                          */
    HET_OP_SWIGLU,     /* silu(src0) * src1                                       */
    HET_OP_CPY,        /* convert/copy src0 into the view src1; result views src1 */
    HET_OP_CONT,       /* contiguous copy of src0                                 */
    HET_OP_ATTN,       /* fused causal attention of q over a K/V cache (GQA)      */
    /* mixture of experts (contracts at the builders below)                      */
    HET_OP_MUL_MAT_ID, /* per-slot expert matmul: src0 experts, src1 x, src2 ids  */
    HET_OP_TOP_K,      /* I32 indices of the k largest values of each row         */
    HET_OP_SUM_ROWS,   /* sum of each row -> (1, ne1, ne2, ne3)                   */
    HET_OP_DIV,        /* src0 / src1 (src1 broadcast over src0)                  */
    HET_OP_SIGMOID,    /* 1 / (1 + exp(-x))                                       */
    HET_OP_MOE_SUM,    /* weighted sum over the expert slot                       */
    HET_OP_COUNT,
};

/* rope modes (op_params[1]) */
enum het_rope_mode {
    HET_ROPE_NORMAL = 0, /* rotate pairs (2i, 2i+1)            — llama            */
    HET_ROPE_NEOX   = 2, /* rotate pairs (i, i + n_dims/2)     — qwen2, qwen3     */
};

/* tensor flags */
enum het_tensor_flag {
    HET_TENSOR_FLAG_INPUT  = 1u << 0, /* filled by the caller before compute      */
    HET_TENSOR_FLAG_OUTPUT = 1u << 1, /* read by the caller after compute         */
    HET_TENSOR_FLAG_WEIGHT = 1u << 2, /* model parameter (read-only)              */
    HET_TENSOR_FLAG_STATE  = 1u << 3, /* persistent between graphs (KV cache)     */
    /* weight whose bytes lie in a clean read-only file mapping that no device
     * of the run reads in place: a device that keeps its own copy (repacked
     * panels, tiles) may drop those pages; a later read faults them back in
     * from the file (set by het_model_prepare) */
    HET_TENSOR_FLAG_DROPPABLE = 1u << 4,
    /* a droppable weight whose pages a device gave back after keeping its own
     * copy: a device that reads it in place faults them back from the file */
    HET_TENSOR_FLAG_DROPPED = 1u << 5,
    /* a node whose storage one source of one node reads and nobody else, the
     * caller included (set by het_graph_mark_readers): a device that computes
     * that reader together with it may leave this node's output unwritten, so
     * a node the caller reads after compute must carry HET_TENSOR_FLAG_OUTPUT */
    HET_TENSOR_FLAG_ONE_READER = 1u << 6,
    /* a node run to time it (calibration's microbenchmarks, the scheduler's
     * online probes), its output thrown away: a device that tunes itself by
     * how long its splits take does not learn from a split holding one (its
     * weights may sit in the caches from the run before, and its time per
     * byte is not a model's) */
    HET_TENSOR_FLAG_PROBE = 1u << 7,
};

struct het_tensor {
    enum het_type      type;
    int64_t            ne[HET_MAX_DIMS];            /* elements per dim, ne[0] innermost   */
    size_t             nb[HET_MAX_DIMS];            /* byte stride per dim                 */

    enum het_op        op;
    int32_t            op_params[HET_MAX_OP_PARAMS]; /* op-specific, see builders          */
    struct het_tensor *src[HET_MAX_SRC];

    struct het_tensor *view_src;  /* storage owner when this is a view, else NULL          */
    size_t             view_offs; /* byte offset into view_src's storage                   */

    void              *data;      /* host address of element [0,0,0,0] once allocated      */
    uint32_t           flags;     /* enum het_tensor_flag                                  */
    int32_t            id;        /* index in the graph's node list (-1 for leaves/views)  */
    int32_t            n_readers; /* a node: sources of nodes that read it, views included
                                     (at most 255), set with HET_TENSOR_FLAG_ONE_READER  */
    void              *extra;     /* CPU device's load-time repack of a weight (owned by it);
                                     other devices keep their own tables keyed by tensor    */
    char               name[HET_MAX_NAME];
};

/* ---------------------------------------------------------------------------
 * Tensor queries (plain functions of the metadata)                          */

int64_t het_nelements(const struct het_tensor *t);
int64_t het_nrows(const struct het_tensor *t);            /* ne1*ne2*ne3          */
size_t  het_nbytes(const struct het_tensor *t);           /* extent of the storage */
size_t  het_row_size(const struct het_tensor *t);         /* bytes of one ne0 row  */
bool    het_is_contiguous(const struct het_tensor *t);    /* dense, standard order */
bool    het_is_contiguous_rows(const struct het_tensor *t); /* nb0 == elem size    */
bool    het_same_shape(const struct het_tensor *a, const struct het_tensor *b);
/* Storage owner of a view chain (the tensor whose data is allocated). */
struct het_tensor *het_tensor_owner(struct het_tensor *t);

/* Initialise t as a standalone dense tensor of the given shape (data NULL).
 * ne beyond n_dims are 1. Row strides use het_type_row_size. */
void het_tensor_init(struct het_tensor *t, enum het_type type, int n_dims, const int64_t *ne);
/* t may be NULL (a failed builder): then nothing happens */
void het_tensor_set_name(struct het_tensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* op_params helpers */
static inline float het_get_op_param_f32(const struct het_tensor *t, int i) {
    union { int32_t i; float f; } u; u.i = t->op_params[i]; return u.f;
}
static inline void het_set_op_param_f32(struct het_tensor *t, int i, float v) {
    union { int32_t i; float f; } u; u.f = v; t->op_params[i] = u.i;
}

/* ---------------------------------------------------------------------------
 * The graph: an arena of tensors plus the ordered list of compute nodes.     */

typedef struct het_graph het_graph;

/* max_tensors bounds the arena (leaves + views + nodes). NULL on failure. */
het_graph *het_graph_init(int max_tensors);
void       het_graph_free(het_graph *g);        /* NULL is a no-op */
/* Forget all tensors, keep the arena (rebuild per step). */
void       het_graph_reset(het_graph *g);

int                het_graph_n_nodes(const het_graph *g);
/* every tensor of the arena (leaves, views and nodes), in creation order */
int                het_graph_n_tensors(const het_graph *g);
struct het_tensor *het_graph_tensor(const het_graph *g, int i);
struct het_tensor *het_graph_node(const het_graph *g, int i);
struct het_tensor *const *het_graph_nodes(const het_graph *g);
/* Sticky error: a builder that fails (arena full, bad shapes) returns NULL,
 * records the reason here, and every later builder returns NULL. */
enum het_status    het_graph_status(const het_graph *g, het_error *err);
/* Sets HET_TENSOR_FLAG_ONE_READER on each node that exactly one source of
 * one node reads (through views too) and that is not an output, and clears
 * it on every other node; n_readers counts those sources on every node. The
 * scheduler calls it when it allocates a graph. */
void               het_graph_mark_readers(het_graph *g);

/* New leaf tensor owned by the graph (an input, e.g. token ids or positions). */
struct het_tensor *het_new_tensor(het_graph *g, enum het_type type, int n_dims, const int64_t *ne);
static inline struct het_tensor *het_new_tensor_1d(het_graph *g, enum het_type type, int64_t ne0) {
    return het_new_tensor(g, type, 1, &ne0);
}

/* Views: no copy. Offsets and strides are in bytes. */
struct het_tensor *het_view_1d(het_graph *g, struct het_tensor *a, int64_t ne0, size_t offset);
struct het_tensor *het_view_2d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1,
                               size_t nb1, size_t offset);
struct het_tensor *het_view_3d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               size_t nb1, size_t nb2, size_t offset);
struct het_tensor *het_view_4d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                               int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Reshape requires a contiguous a. */
struct het_tensor *het_reshape_2d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1);
struct het_tensor *het_reshape_3d(het_graph *g, struct het_tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
/* permute: axis i of a becomes axis axes[i] of the result. */
struct het_tensor *het_permute(het_graph *g, struct het_tensor *a, int ax0, int ax1, int ax2, int ax3);
struct het_tensor *het_transpose(het_graph *g, struct het_tensor *a); /* swap dims 0 and 1 */

/* Compute ops. Result is F32 unless stated. */
/* rows of a (K,V) picked by ids (I32, M) -> (K,M). */
struct het_tensor *het_get_rows(het_graph *g, struct het_tensor *a, struct het_tensor *ids);
/* a (K,N,[B2,B3]) x b (K,M,B2',B3') -> (N,M,B2',B3'); out[m][n] = sum_k a[n][k] b[m][k].
 * a is broadcast over dims 2,3 (B2' a multiple of B2: GQA). b must be F32. */
struct het_tensor *het_mul_mat(het_graph *g, struct het_tensor *a, struct het_tensor *b);
struct het_tensor *het_add(het_graph *g, struct het_tensor *a, struct het_tensor *b);
struct het_tensor *het_mul(het_graph *g, struct het_tensor *a, struct het_tensor *b);
struct het_tensor *het_scale(het_graph *g, struct het_tensor *a, float s);
struct het_tensor *het_rms_norm(het_graph *g, struct het_tensor *a, float eps);
/* a (head_dim, n_head, n_tok), pos (I32, n_tok). The first n_dims of each
 * head rotate (partial rotary), theta = pos * freq_scale * base^(-2i/n_dims). */
struct het_tensor *het_rope(het_graph *g, struct het_tensor *a, struct het_tensor *pos, int n_dims,
                            enum het_rope_mode mode, float freq_base, float freq_scale);
/* Row-wise softmax(a*scale + mask). mask (optional, F32 (ne0, ne1) broadcast
 * over dims 2,3). If causal_past >= 0, element j of row i (dim 1) is masked
 * when j > i + causal_past. */
struct het_tensor *het_softmax(het_graph *g, struct het_tensor *a, struct het_tensor *mask, float scale,
                               int32_t causal_past);
struct het_tensor *het_silu(het_graph *g, struct het_tensor *a);
struct het_tensor *het_swiglu(het_graph *g, struct het_tensor *gate, struct het_tensor *up);
/* Copy a into dst (same element count, any strides; converts type). Result is a view of dst. */
struct het_tensor *het_cpy(het_graph *g, struct het_tensor *a, struct het_tensor *dst);
/* Contiguous F32 copy of a (any strides). */
struct het_tensor *het_cont(het_graph *g, struct het_tensor *a);
/* Fused attention. q (hd, n_head, n_tok) F32; k, v (hd, n_kv_head, n_kv) F16 or
 * F32 views of the cache (any strides). Query t attends to keys j <= t + n_past.
 * out (hd, n_head, n_tok) F32, out = softmax(q k^T * scale) v per head;
 * head h reads kv head h / (n_head / n_kv_head). */
struct het_tensor *het_attn(het_graph *g, struct het_tensor *q, struct het_tensor *k, struct het_tensor *v,
                            float scale, int32_t n_past);

/* ---------------------------------------------------------------------------
 * Mixture-of-experts ops. Every tensor, the I32 ones included, is read
 * through its byte strides nb[]: views (of ids too) are legal inputs.
 *
 * mul_mat_id: as (K, N, E) expert weights of any mul_mat weight type, each
 * expert one (K, N) matrix at as + e*nb[2]; b (K, n_b, T) F32; ids (k, T)
 * I32 with n_b == 1 or n_b == k. Result F32 (N, k, T):
 *     out[:, s, t] = as[:, :, ids[s, t]] x b[:, s % n_b, t]
 * (n_b == 1: one input column per token shared by its k experts, the
 * gate/up projections; n_b == k: one column per slot, the down projection).
 * An id outside [0, E) is an error of the kernel (HET_ERR_INVALID). */
struct het_tensor *het_mul_mat_id(het_graph *g, struct het_tensor *as, struct het_tensor *b,
                                  struct het_tensor *ids);
/* top_k: a (n, ne1, ne2, ne3) F32 -> I32 (k, ne1, ne2, ne3): per row the
 * indices of the k largest values, largest first; equal values keep index
 * order (lower index first). 1 <= k <= n. (ggml's argsort descending, viewed
 * to its first k.) NaN compares below every number. */
struct het_tensor *het_top_k(het_graph *g, struct het_tensor *a, int k);
/* sum_rows: a (n, ne1, ne2, ne3) F32 -> (1, ne1, ne2, ne3), each row summed
 * (the CPU in double, Vulkan in float pairwise: equal to float rounding). */
struct het_tensor *het_sum_rows(het_graph *g, struct het_tensor *a);
/* div: a / b element-wise, b broadcast over a as for het_add. */
struct het_tensor *het_div(het_graph *g, struct het_tensor *a, struct het_tensor *b);
struct het_tensor *het_sigmoid(het_graph *g, struct het_tensor *a);
/* moe_sum: x (N, k, T) F32 (the experts' outputs), w (k, T) F32 (their
 * routing weights) -> (N, T):  out[:, t] = sum_s w[s, t] * x[:, s, t],
 * summed in slot order s = 0..k-1. */
struct het_tensor *het_moe_sum(het_graph *g, struct het_tensor *x, struct het_tensor *w);

const char *het_op_name(enum het_op op);

#ifdef __cplusplus
}
#endif
#endif /* HET_GRAPH_H */
