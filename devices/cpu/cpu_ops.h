/*
 * cpu_ops.h — the CPU backend's kernel contract (internal).
 *
 * Every op has one entry point het_cpu_<op>(params, dst) that reads dst->src[]
 * and writes dst, honouring every tensor's byte strides nb[]. Kernels run
 * as one job of the device's thread pool per split (cpu_pool.c): every
 * thread of the job calls the same kernel with its own ith, cuts the work
 * into parts and takes parts until none is left (het_cpu_part_first/next,
 * cpu_sync.c; threads that join late skip the steps that are over, so
 * kernels touch tensor data only inside parts); a kernel with phases
 * (e.g. quantise activations, then multiply) runs one such step per phase.
 * ith only picks the thread's own scratch, never which rows it computes.
 *
 * Per-node scratch ("work data") is sized by het_cpu_work_size() and shared
 * by all threads of the node; the device allocates the maximum over a split.
 */
#ifndef HET_CPU_OPS_H
#define HET_CPU_OPS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/graph.h"

/* What the processor can run; filled once from cpuid (cpu_features.c). */
struct het_cpu_features {
    bool avx2;        /* + fma + f16c                                  */
    bool avx512;      /* f + bw + vl + dq                              */
    bool avx512_vnni;
    bool avx_vnni;    /* VEX-encoded VNNI (Zen 5 / Alder Lake)         */
    bool avx512_bf16;
    bool amx_int8;    /* AMX tiles + INT8, and the OS granted the state (not
                       * asked for when HET_CPU_ISA caps the level below amx) */
    /* which processor: cpuid's vendor, brand string (as the hypervisor
     * passes it: a VM may shorten it), and display family / model /
     * stepping (base and extended fields combined) */
    char     vendor[13];
    char     brand[49];
    unsigned family, model, stepping;
};

/* Kernel level actually used, chosen once when the device starts; lowered
 * by HET_CPU_ISA=scalar|avx2|avx512|avx512vnni|amx for tests. Each level has
 * its own kernel table (quant_dot.h); the levels are ordered, a higher one
 * able to run everything a lower one does. */
enum het_cpu_isa {
    HET_CPU_ISA_SCALAR     = 0,
    HET_CPU_ISA_AVX2       = 1,
    HET_CPU_ISA_AVX512     = 2, /* F/BW/VL/DQ; int8 sums by vpmaddubsw + vpmaddwd */
    HET_CPU_ISA_AVX512VNNI = 3, /* + AVX512-VNNI: int8 sums by vpdpbusd          */
    HET_CPU_ISA_AMX        = 4, /* + AMX-INT8: prefill's q4_0/q8_0 sums by tiles */
    HET_CPU_ISA_COUNT
};

/* How the threads of a job share a node's work (cpu_sync.c). A kernel runs
 * as one or more steps (one per phase, e.g. quantise the activations, then
 * multiply); a step is cut into parts, each thread taking from its own run
 * of adjacent parts first and then from the others', and a step is over
 * when all its parts are done. Every thread must
 * walk the same steps with the same part counts. */
#define HET_CPU_PARTS_MAX 65535
/* Runs of adjacent parts a step is cut into, one per thread up to this many
 * threads (cpu_sync.c): each on a cache line of its own. */
#define HET_CPU_SYNC_RUNS 16
struct het_cpu_sync_run {
    _Alignas(64) _Atomic uint64_t next; /* step << 32 | parts done << 16 | next part to hand out */
};
struct het_cpu_sync {
    struct het_cpu_sync_run run[HET_CPU_SYNC_RUNS];
    _Atomic uint64_t work;     /* step << 32: the step open now                     */
    _Atomic uint64_t closed;   /* when the last step closed: ns << 16 | its step's
                                  low 16 bits (the threads' hand-off, cpu_sync.c) */
    _Atomic unsigned epoch;    /* steps closed: the futex word sleepers wait on    */
    _Atomic int      sleepers;
    _Atomic uint64_t gate;     /* pooled: node key << 32 | closed | workers in the node */
    bool             pooled;   /* threads of a cpu_pool job (else: one OpenMP team) */
};
/* One thread's place in the steps. */
struct het_cpu_seat;
struct het_cpu_worker {
    struct het_cpu_sync *sync;
    unsigned             step;   /* the step this thread is in                    */
    long                 waits;  /* waits for a step still open                   */
    long                 sleeps; /* of them, those that outlasted the spin (futex) */
    struct het_cpu_seat *seat;   /* a pool worker's place in its job (cpu_pool.c);
                                    NULL: the job's caller, or an OpenMP thread   */
    const uint8_t       *ahead;  /* weights the next decode matmul streams first: */
    size_t               ahead_left; /* bytes of them still to ask for while this
                                        thread waits for a step (cpu_sync.c)      */
    int64_t              handoff_ns;  /* the least time from a step's close to this
                                         thread seeing it, over handoff_n waits   */
    int                  handoff_n;   /* (cpu_sync.c; the device resets both)     */
};
void het_cpu_sync_init(struct het_cpu_sync *s);
void het_cpu_worker_init(struct het_cpu_worker *w, struct het_cpu_sync *s);

/* How decode's runs of load-time panels (every weight byte read once a
 * token) ask for the lines ahead of them. NTA keeps the lines out of L2 and
 * L3 on their way out (the KV cache and the small nodes' vectors stay);
 * T0 asks for them as plain lines, T1 into L2. Which streams fastest
 * depends on the machine and on where the device's threads run: the device
 * races them (cpu_stream.c); the arithmetic is the same. */
enum het_cpu_stream { HET_CPU_STREAM_NTA, HET_CPU_STREAM_T0, HET_CPU_STREAM_T1, HET_CPU_STREAM_COUNT };

struct het_compute_params {
    int              ith;    /* this thread's index, 0 <= ith < nth     */
    int              nth;    /* threads that may run the node (a pool's size; some
                                may never take part): sizes parts and scratch   */
    void            *wdata;  /* shared per-node scratch                 */
    size_t           wsize;  /* its size in bytes                       */
    enum het_cpu_isa isa;    /* kernel level to use                     */
    struct het_cpu_worker *worker; /* this thread's place in the shared steps; NULL:
                                      thread ith takes parts ith, ith + nth, ... and
                                      steps end at an OpenMP barrier (tests)       */
    bool             f32_act; /* matmul: F32 activations x dequantised weights */
    enum het_cpu_stream stream; /* how decode's panel runs ask ahead (NTA: 0)      */
    size_t           l2_bytes; /* a core's L2 (prefill attention keeps F32 K/V to
                                  fit it); 0: not known. het_cpu_work_size must
                                  have been given the same                    */
};

void het_cpu_features_detect(struct het_cpu_features *f);
/* A core's L2 cache in bytes (hwloc: the first L2 object), 0 when the
 * topology does not say; the CPU device reads it once at init. */
size_t het_cpu_l2_bytes(void);
/* The core design a family / model belongs to ("Zen 4"), for the AMD
 * families 17h-1Ah; NULL when not known here (every Intel part: its model
 * numbers do not map to one core design without a longer table). */
const char *het_cpu_core_name(const struct het_cpu_features *f);
/* "AMD EPYC (family 19h model 11h stepping 1, Zen 4)" into buf. */
void het_cpu_identity(const struct het_cpu_features *f, char *buf, size_t size);
/* Best ISA level for f, capped by the HET_CPU_ISA environment variable. */
enum het_cpu_isa het_cpu_isa_select(const struct het_cpu_features *f);
/* HET_CPU_ISA, when set and not empty, must name a level: HET_OK, or
 * HET_ERR_INVALID with a message naming the value (het_cpu_isa_select
 * alone would run at the best level, the value ignored). */
enum het_status het_cpu_isa_env_check(het_error *err);
const char *het_cpu_isa_name(enum het_cpu_isa isa);

/* A step of n parts (n <= HET_CPU_PARTS_MAX; n <= 0: no step at all):
 *     for (int64_t k = het_cpu_part_first(p, n); k < n; k = het_cpu_part_next(p, n, k))
 *         ... part k ...
 * The loop ends (returns n) once every part of the step is done, by any
 * thread; nothing may leave it early. Kernels touch tensor data only inside
 * parts: a thread that falls behind runs no part of a step that is over. */
int64_t het_cpu_part_first(const struct het_compute_params *p, int64_t n);
int64_t het_cpu_part_next(const struct het_compute_params *p, int64_t n, int64_t part);
/* A step every thread of the region must reach before any leaves it: for a
 * kernel whose steps depend on data it wrote itself (mul_mat_id's grouping),
 * ending it with this keeps every thread in the node until no thread reads
 * that data any more. */
void het_cpu_sync_all(const struct het_compute_params *p);
/* In a pool job, a node whose kernel calls het_cpu_sync_all is entered
 * through this first, with a key unique to the node among all the pool's
 * nodes (and larger than the earlier ones): a worker that would come into
 * the node after its threads began meeting at the end, or after it ended,
 * gets false and must leave the job (it cannot know the node's steps without
 * the node's data). The caller (no seat) always gets true, and
 * het_cpu_sync_all waits for it and the workers that got true. Elsewhere
 * (no pool, no worker) always true. */
bool het_cpu_node_enter(const struct het_compute_params *p, unsigned key);
/* Parts to cut `units` of work into: a few per thread, each at least
 * min_units (when there are that many), one with a single thread, 0 for no
 * work. */
int64_t het_cpu_n_parts(const struct het_compute_params *p, int64_t units, int64_t min_units);

/* Scratch bytes node needs with nth threads (0 if none); f32_act and
 * l2_bytes as in het_compute_params. */
size_t het_cpu_work_size(const struct het_tensor *node, int nth, bool f32_act, size_t l2_bytes);
/* Bytes a node streams, roughly (matmul weights once per 4 rows of b):
 * how much work there is to share between threads. */
size_t het_cpu_node_work(const struct het_tensor *node);
/* Can the CPU run this node (op, types, shapes)? */
bool het_cpu_supports(const struct het_tensor *node);
/* Run one node; returns HET_OK or HET_ERR_UNSUPPORTED (never aborts). */
enum het_status het_cpu_compute(const struct het_compute_params *p, struct het_tensor *node);
/* Run nodes[0], or a group of nodes from nodes[0] that share one step
 * (het_cpu_mul_mat_group, het_cpu_norm_chain); returns how many nodes ran,
 * *st their status. */
int             het_cpu_compute_nodes(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                                      enum het_status *st);
/* How many nodes from nodes[0] run as one pass of fused kernels (a SWIGLU
 * into its matmul, a residual norm and the first matmul it feeds, a norm
 * chain), 1 when none: the device keeps them together in one kind of step.
 * What it looks at depends on nodes[0]'s op alone (ADD: up to 3 +
 * HET_CPU_MM_GROUP_MAX nodes, RMS_NORM 3, SWIGLU 2, else nodes[0] only), as
 * the device's kept decisions rely on (cpu_device.c, cpu_fuse_look). */
int             het_cpu_fused_len(struct het_tensor *const *nodes, int n);

/* ---- op entry points (one file per op family) ---------------------------- */
/* matmul.c */
size_t          het_cpu_mul_mat_work_size(const struct het_tensor *node, int nth, bool f32_act);
bool            het_cpu_mul_mat_supports(const struct het_tensor *node);
enum het_status het_cpu_mul_mat(const struct het_compute_params *p, struct het_tensor *dst);
struct het_q8r_layout;
/* The int8 rows a quantised-weight dst multiplies (b's rows, as het_cpu_mul_mat
 * quantises them at isa for dst's M): their layout and the quantiser that
 * writes one; false when dst takes none (float weights, f32_act). */
bool            het_cpu_mul_mat_row_format(struct het_tensor *dst, enum het_cpu_isa isa, bool f32_act,
                                           struct het_q8r_layout *ql,
                                           void (**quantize)(const float *x, const struct het_q8r_layout *l,
                                                             void *row));
/* het_cpu_mul_mat of a 2-D dst whose b rows the caller quantised already
 * (rows[m]: b's row m in het_cpu_mul_mat_row_format's layout): b's data is
 * not read, and no step prepares rows. Its scratch fits in
 * het_cpu_mul_mat_work_size's. */
enum het_status het_cpu_mul_mat_rows(const struct het_compute_params *p, struct het_tensor *dst,
                                     const uint8_t *const *rows);
/* Matmuls that read the same activations, run as one step: nodes[0] and
 * the longest run of the nodes after it (at most HET_CPU_MM_GROUP_MAX in
 * all) that multiply the same b, when b is one row (decode) that each thread
 * quantises once for all of them, and no member writes what another reads.
 * The threads take parts of the members' rows from one counter, so the
 * group pays one step end instead of one per matmul. Returns how many nodes
 * it ran (1: nodes[0] alone, as het_cpu_mul_mat); *st as het_cpu_mul_mat's.
 * Every thread gets the same count. rn (else NULL): b's rows are made from
 * that residual norm's (residual_norm.c), and 0 is returned, nothing run,
 * when nodes[0] does not prepare its own activations or a matmul that must
 * join (rn->y_readers) does not. */
#define HET_CPU_MM_GROUP_MAX 4
struct het_cpu_residual_norm;
int             het_cpu_mul_mat_group(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                                      const struct het_cpu_residual_norm *rn, enum het_status *st);
/* A step that matmuls lead (a group as above, with the residual norm that
 * makes its activations or without; a SWIGLU into its matmul), planned
 * once and then run from that plan: the device plans a split's such steps
 * ahead with its kept decisions, so that the threads of a decode step read
 * one plan instead of deriving it from the nodes' metadata, which the
 * weights' stream has pushed out of the caches by the next token (a Qwen3
 * layer's first step took ~2 us a thread to plan on two CCDs, Zen 5).
 * Opaque storage of HET_CPU_MM_STEP_BYTES, 64-aligned; a step runs where it
 * was planned (its plans point into it) and holds while the nodes it looked
 * at keep their shapes, storage and weights. */
#define HET_CPU_MM_STEP_BYTES 2048
struct het_cpu_mm_step;
/* The step at nodes[0] planned into *s (cpu_dispatch.c): how many nodes it
 * covers, *st their status (a step with a status other than HET_OK must not
 * run); 0 where no such step starts (nothing planned: nodes[0] is not a
 * matmul, a residual norm before matmuls, or a SWIGLU into its matmul, or
 * the residual norm's matmuls do not make their own activations). */
int het_cpu_mm_step_plan(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                         struct het_cpu_mm_step *s, enum het_status *st);
/* matmul.c: the group at nodes[0] (its members; 0 and 1 as
 * het_cpu_mul_mat_group's), the SWIGLU into mm (2), planned into *s. */
int het_cpu_mm_step_group(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                          const struct het_cpu_residual_norm *rn, struct het_cpu_mm_step *s, enum het_status *st);
int het_cpu_mm_step_swiglu(const struct het_compute_params *p, struct het_tensor *mm, struct het_cpu_mm_step *s,
                           enum het_status *st);
/* Runs a planned step with p (its threads, scratch and level as planned;
 * HET_ERR_INVALID when p's scratch is smaller than the plan's): the nodes
 * it covers, *st their status. */
int het_cpu_mm_step_run(const struct het_compute_params *p, const struct het_cpu_mm_step *s, enum het_status *st);
/* The nodes a planned step covers; its plan looked at those and the one
 * after them (where a group stopped). */
int het_cpu_mm_step_nodes(const struct het_cpu_mm_step *s);
/* residual_norm.c: ADD (a + b, the residual), RMS_NORM of the sum, MUL by
 * the norm's gain, computed by the matmuls that read the gain's output as
 * they prepare their activations (decode: one row of b), the outputs stored
 * by the thread that runs the matmul step's first part. */
struct het_cpu_residual_norm {
    const struct het_tensor *a, *b;   /* the ADD's inputs                          */
    const struct het_tensor *gain;    /* the MUL's src[1]                          */
    const struct het_tensor *sum;     /* the ADD's output: stored                  */
    const struct het_tensor *norm_out;/* the RMS_NORM's output when another node reads
                                         it (stored), else NULL (never written)   */
    const struct het_tensor *y;       /* the MUL's output when stored, else NULL:  */
    int                      y_readers;/* then the matmuls after it that are all its
                                         readers, all of which the step must run  */
    float                    eps;
};
/* nodes[0..3) as such a chain before the matmul nodes[3] (F32, the sum's rows
 * contiguous, no output sharing a byte with an input, another output, or
 * the matmul's weights and output): 3 and *r filled, else 0. */
int  het_cpu_residual_norm_find(struct het_tensor *const *nodes, int n, struct het_cpu_residual_norm *r);
/* May the matmul mm join: its output and weights apart from r's memory. */
bool het_cpu_residual_norm_apart(const struct het_cpu_residual_norm *r, const struct het_tensor *mm);
/* Row (i1, i2, i3) of r's MUL output into y (contiguous, ne0 floats): the
 * nodes' arithmetic; store: the outputs' rows written too. */
void het_cpu_residual_norm_row(enum het_cpu_isa isa, const struct het_cpu_residual_norm *r, int64_t i1, int64_t i2,
                               int64_t i3, float *y, bool store);
/* A SWIGLU sw whose only reader is the matmul mm, run as one: mm computes
 * each row of its activations from sw's inputs as it prepares them
 * (het_cpu_swiglu_row), sw's storage is never written, and the threads pay
 * one step end fewer. het_cpu_mul_mat_takes_swiglu says whether the pair
 * qualifies (also F32 rows, mm's output apart from sw's inputs). */
bool            het_cpu_mul_mat_takes_swiglu(const struct het_tensor *sw, const struct het_tensor *mm);
enum het_status het_cpu_mul_mat_swiglu(const struct het_compute_params *p, struct het_tensor *mm);
/* True when `isa` (or a level below it, above scalar) has a GEMV that streams
 * `type` weights as stored; otherwise unpacked weights take the scalar one. */
bool            het_cpu_gemv_is_simd(enum het_type type, enum het_cpu_isa isa);
/* get_rows.c */
enum het_status het_cpu_get_rows(const struct het_compute_params *p, struct het_tensor *dst);
/* binary.c: add, mul */
enum het_status het_cpu_add(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_mul(const struct het_compute_params *p, struct het_tensor *dst);
/* unary.c: scale, silu, swiglu */
enum het_status het_cpu_scale(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_silu(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_swiglu(const struct het_compute_params *p, struct het_tensor *dst);
/* Row (i1, i2, i3) of the SWIGLU node sw into y (elements sy bytes apart),
 * from its inputs: the node's own arithmetic, which sw's storage is not. */
void            het_cpu_swiglu_row(enum het_cpu_isa isa, const struct het_tensor *sw, int64_t i1, int64_t i2,
                                   int64_t i3, float *y, size_t sy);
/* norm.c */
enum het_status het_cpu_rms_norm(const struct het_compute_params *p, struct het_tensor *dst);
/* 1 / sqrt(mean(x^2) + eps) of n elements sx bytes apart, as RMS_NORM takes it */
float           het_cpu_rms_scale(enum het_cpu_isa isa, int64_t n, const char *x, size_t sx, float eps);
/* norm_chain.c: an RMS_NORM (nodes[0]) with the MUL by a gain that alone
 * reads it, and the ROPE that alone reads that, in one pass; returns how
 * many nodes ran (0: nodes[0] starts no such chain, nothing ran), *st their
 * status. The same count on every thread. */
int             het_cpu_norm_chain(const struct het_compute_params *p, struct het_tensor *const *nodes, int n,
                                   enum het_status *st);
/* How many nodes het_cpu_norm_chain would run from nodes[0] (0: none). */
int             het_cpu_norm_chain_len(struct het_tensor *const *nodes, int n);
/* rope.c */
enum het_status het_cpu_rope(const struct het_compute_params *p, struct het_tensor *dst);
/* softmax.c */
enum het_status het_cpu_softmax(const struct het_compute_params *p, struct het_tensor *dst);
/* copy.c: cpy, cont */
enum het_status het_cpu_cpy(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_cont(const struct het_compute_params *p, struct het_tensor *dst);
/* matmul_id.c: the experts of a mixture of experts, through het_cpu_mul_mat */
bool            het_cpu_mul_mat_id_supports(const struct het_tensor *node);
size_t          het_cpu_mul_mat_id_work_size(const struct het_tensor *node, int nth, bool f32_act);
enum het_status het_cpu_mul_mat_id(const struct het_compute_params *p, struct het_tensor *dst);
/* Load-time panels of a 3-D expert tensor (K, N, E): E blocks, each
 * het_cpu_mul_mat_repack's buffer of one expert's (K, N) slab, which
 * mul_mat_id uses when tensor->extra points at them (0 / UNSUPPORTED when
 * the type has no panel form at this level or the tensor is not 3-D). */
size_t          het_cpu_mul_mat_id_repack_size(const struct het_tensor *as, enum het_cpu_isa isa);
enum het_status het_cpu_mul_mat_id_repack(const struct het_tensor *as, enum het_cpu_isa isa, void *dst, size_t size);
/* In pieces (quant_dot.h's het_cpu_mul_mat_repack_range): items are the
 * experts' panels in buffer order. */
int64_t         het_cpu_mul_mat_id_repack_items(const struct het_tensor *as, enum het_cpu_isa isa);
enum het_status het_cpu_mul_mat_id_repack_range(const struct het_tensor *as, enum het_cpu_isa isa, void *dst,
                                                size_t size, int64_t lo, int64_t hi);
/* moe_route.c: top_k, sum_rows, moe_sum */
enum het_status het_cpu_top_k(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_sum_rows(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_moe_sum(const struct het_compute_params *p, struct het_tensor *dst);
/* binary.c: div; unary.c: sigmoid */
enum het_status het_cpu_div(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_sigmoid(const struct het_compute_params *p, struct het_tensor *dst);
/* attention.c */
size_t          het_cpu_attn_work_size(const struct het_tensor *node, int nth, size_t l2_bytes);
enum het_status het_cpu_attn(const struct het_compute_params *p, struct het_tensor *dst);

#endif /* HET_CPU_OPS_H */
