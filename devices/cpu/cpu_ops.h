/*
 * cpu_ops.h — the CPU backend's kernel contract (internal).
 *
 * Every op has one entry point het_cpu_<op>(params, dst) that reads dst->src[]
 * and writes dst, honouring every tensor's byte strides nb[]. Kernels run
 * inside one OpenMP parallel region per split: all nth threads call the same
 * kernel with their own ith and split the rows between them; a kernel that
 * needs a phase (e.g. quantise activations, then multiply) calls
 * het_cpu_barrier(), which every thread must reach.
 *
 * Per-node scratch ("work data") is sized by het_cpu_work_size() and shared
 * by all threads of the node; the device allocates the maximum over a split.
 */
#ifndef HET_CPU_OPS_H
#define HET_CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "het/graph.h"

/* What the processor can run; filled once from cpuid (cpu_features.c). */
struct het_cpu_features {
    bool avx2;        /* + fma + f16c                                  */
    bool avx512;      /* f + bw + vl + dq                              */
    bool avx512_vnni;
    bool avx_vnni;    /* VEX-encoded VNNI (Zen 5 / Alder Lake)         */
    bool avx512_bf16;
};

/* Kernel level actually used; lowered by HET_CPU_ISA=scalar|avx2|avx512 for tests. */
enum het_cpu_isa {
    HET_CPU_ISA_SCALAR = 0,
    HET_CPU_ISA_AVX2   = 1,
    HET_CPU_ISA_AVX512 = 2,
};

/* Barrier of the device's threads (cpu_sync.c): spins briefly, yields,
 * then sleeps. */
struct het_cpu_sync {
    _Atomic int      arrived;
    _Atomic unsigned phase;
    _Atomic int      sleepers;
    int              nth;
};
void het_cpu_sync_init(struct het_cpu_sync *s, int nth);
void het_cpu_sync_wait(struct het_cpu_sync *s);

struct het_compute_params {
    int              ith;    /* this thread's index, 0 <= ith < nth     */
    int              nth;    /* threads running the node                */
    void            *wdata;  /* shared per-node scratch                 */
    size_t           wsize;  /* its size in bytes                       */
    enum het_cpu_isa isa;    /* kernel level to use                     */
    struct het_cpu_sync *sync; /* the threads' barrier; NULL: omp barrier */
    bool             f32_act; /* matmul: F32 activations x dequantised weights */
};

void het_cpu_features_detect(struct het_cpu_features *f);
/* Best ISA level for f, capped by the HET_CPU_ISA environment variable. */
enum het_cpu_isa het_cpu_isa_select(const struct het_cpu_features *f);
const char *het_cpu_isa_name(enum het_cpu_isa isa);

/* Barrier across the nth threads of the current parallel region (p->sync,
 * or an OpenMP barrier when there is none). */
void het_cpu_barrier(const struct het_compute_params *p);

/* Scratch bytes node needs with nth threads (0 if none); f32_act as in
 * het_compute_params. */
size_t het_cpu_work_size(const struct het_tensor *node, int nth, bool f32_act);
/* Can the CPU run this node (op, types, shapes)? */
bool het_cpu_supports(const struct het_tensor *node);
/* Run one node; returns HET_OK or HET_ERR_UNSUPPORTED (never aborts). */
enum het_status het_cpu_compute(const struct het_compute_params *p, struct het_tensor *node);

/* ---- op entry points (one file per op family) ---------------------------- */
/* matmul.c */
size_t          het_cpu_mul_mat_work_size(const struct het_tensor *node, int nth, bool f32_act);
bool            het_cpu_mul_mat_supports(const struct het_tensor *node);
enum het_status het_cpu_mul_mat(const struct het_compute_params *p, struct het_tensor *dst);
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
/* norm.c */
enum het_status het_cpu_rms_norm(const struct het_compute_params *p, struct het_tensor *dst);
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
/* moe_route.c: top_k, sum_rows, moe_sum */
enum het_status het_cpu_top_k(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_sum_rows(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_moe_sum(const struct het_compute_params *p, struct het_tensor *dst);
/* binary.c: div; unary.c: sigmoid */
enum het_status het_cpu_div(const struct het_compute_params *p, struct het_tensor *dst);
enum het_status het_cpu_sigmoid(const struct het_compute_params *p, struct het_tensor *dst);
/* attention.c */
size_t          het_cpu_attn_work_size(const struct het_tensor *node, int nth);
enum het_status het_cpu_attn(const struct het_compute_params *p, struct het_tensor *dst);

#endif /* HET_CPU_OPS_H */
