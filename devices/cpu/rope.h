/*
 * rope.h — the CPU's rotary embedding by token, for rope.c's node kernel and
 * for kernels that rotate rows they have just made (norm_chain.c).
 */
#ifndef HET_CPU_ROPE_H
#define HET_CPU_ROPE_H

#include "devices/cpu/cpu_ops.h"

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
/* Heads [h0, h1) of token (i2, i3), for a kernel that makes x's rows just
 * before they are rotated. */
typedef void (*het_rope_heads_fn)(const void *ctx, int64_t i2, int64_t i3, int64_t h0, int64_t h1);
/* The node kernel's parts (tokens, or heads when there are fewer tokens
 * than threads) taken from the device's counter: each token's heads of the
 * part through `before` (if not NULL), then rotated. */
void            het_cpu_rope_parts(const struct het_compute_params *p, const struct het_rope_args *a,
                                   het_rope_heads_fn before, const void *ctx);

#endif
