/*
 * rope.h — the CPU's rotary embedding by token, for rope.c's node kernel and
 * for kernels that rotate rows they have just made (norm_chain.c).
 */
#ifndef HET_CPU_ROPE_H
#define HET_CPU_ROPE_H

#include "het/graph.h"

struct het_rope_args {
    const struct het_tensor *x;   /* rows rotated (may be y: in place) */
    struct het_tensor       *y;   /* the ROPE node                     */
    const struct het_tensor *pos; /* I32 position of each token        */
    int                      n_dims;
    bool                     neox;
    float                    theta_scale;
    float                    freq_scale;
};

/* The ROPE node dst's rotation of x (x's shape is dst's); checks types,
 * shapes and mode as the node kernel does. */
enum het_status het_cpu_rope_args(struct het_tensor *dst, const struct het_tensor *x, struct het_rope_args *a);
/* Every rotation of heads [h0, h1) of token (i2, i3) at position pos: x's
 * rows into y's, element by element, so x may be y. */
void            het_cpu_rope_token(const struct het_rope_args *a, int64_t i2, int64_t i3, int64_t h0, int64_t h1,
                                   int32_t pos);
int32_t         het_cpu_rope_pos(const struct het_rope_args *a, int64_t i2);
/* Are the node's parts tokens (else heads: fewer tokens than threads)? */
bool            het_cpu_rope_by_token(const struct het_rope_args *a, int nth);

#endif
