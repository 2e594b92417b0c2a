/*
 * mm_node.h — the matmul node the CPU benchmarks run (bench_matmul.c,
 * bench_stream.c): weights a (K x N, of type), activations b (K x M, F32)
 * and the result d (N x M, F32) over buffers the caller owns, d = a x b.
 * The three tensors are the caller's and must stay where they are (d
 * points at a and b).
 */
#ifndef HET_BENCH_MM_NODE_H
#define HET_BENCH_MM_NODE_H

#include "het/graph.h"

static inline void bench_mm_node(struct het_tensor *a, struct het_tensor *b, struct het_tensor *d, enum het_type type,
                                 int64_t K, int64_t N, int64_t M, void *a_data, float *b_data, float *d_data)
{
    const int64_t ane[2] = { K, N }, bne[2] = { K, M }, dne[2] = { N, M };
    het_tensor_init(a, type, 2, ane);
    het_tensor_init(b, HET_TYPE_F32, 2, bne);
    het_tensor_init(d, HET_TYPE_F32, 2, dne);
    a->data = a_data;
    b->data = b_data;
    d->data = d_data;
    d->op = HET_OP_MUL_MAT;
    d->src[0] = a;
    d->src[1] = b;
}

#endif /* HET_BENCH_MM_NODE_H */
