/*
 * rope.c — CPU kernel for ROPE (rotary position embedding).
 *
 * src0 (head_dim, n_head, n_tok, ne3) F32, src1 I32 positions (n_tok).
 * op_params: [0] n_dims (rotated dims, even, <= head_dim; the rest pass
 * through), [1] mode (HET_ROPE_NORMAL pairs (2i, 2i+1), HET_ROPE_NEOX pairs
 * (i, i + n_dims/2)), [2] float freq_base, [3] float freq_scale.
 * Pair i turns by theta_i = pos * freq_scale * base^(-2i/n_dims):
 *     out0 = x0 cos - x1 sin,  out1 = x0 sin + x1 cos.
 * theta is built the way ggml builds it (theta_scale = powf(base, -2/n_dims)
 * multiplied in step by step, in float), so the angles are llama.cpp's
 * exactly and greedy decoding picks the same tokens.
 *
 * cos/sin are computed once per (token, pair) in chunks of ROPE_CHUNK pairs
 * and applied to every head of that token. Threads split tokens, or heads
 * when there are fewer tokens than threads (decode).
 */
#include <math.h>

#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/rope.h"
#include "devices/cpu/vec.h"

#define ROPE_CHUNK 64 /* pairs whose cos/sin are cached at once */

/* Index of the two elements of pair i (0 <= i < n_dims/2). */
static void rope_pair(const struct het_rope_args *a, int i, int64_t *e0, int64_t *e1)
{
    if (a->neox) { *e0 = i; *e1 = i + a->n_dims / 2; }
    else         { *e0 = 2 * i; *e1 = 2 * i + 1; }
}

/* Rotate pairs [i0, i0+n) of heads [h0, h1) of token (i2, i3). */
static void rope_apply_chunk(const struct het_rope_args *a, int64_t i2, int64_t i3, int64_t h0, int64_t h1, int i0,
                             int n, const float *cs, const float *sn)
{
    const size_t sx = a->x->nb[0], sy = a->y->nb[0];
    const bool dense = sx == sizeof(float) && sy == sizeof(float);
    for (int64_t h = h0; h < h1; h++) {
        const char *rx = het_vec_row(a->x, h, i2, i3);
        char *ry = het_vec_row(a->y, h, i2, i3);
        if (dense && a->neox) { /* pairs (i, i + n_dims/2): two contiguous runs */
            const float *x0 = (const float *)rx + i0, *x1 = x0 + a->n_dims / 2;
            float *y0 = (float *)ry + i0, *y1 = y0 + a->n_dims / 2;
#pragma omp simd
            for (int k = 0; k < n; k++) {
                const float u = x0[k], v = x1[k];
                y0[k] = u * cs[k] - v * sn[k];
                y1[k] = u * sn[k] + v * cs[k];
            }
            continue;
        }
        for (int k = 0; k < n; k++) {
            int64_t e0, e1;
            rope_pair(a, i0 + k, &e0, &e1);
            float x0 = *(const float *)(rx + e0 * sx), x1 = *(const float *)(rx + e1 * sx);
            *(float *)(ry + e0 * sy) = x0 * cs[k] - x1 * sn[k];
            *(float *)(ry + e1 * sy) = x0 * sn[k] + x1 * cs[k];
        }
    }
}

/* Copy the dims past n_dims of heads [h0, h1) unchanged. */
static void rope_pass_through(const struct het_rope_args *a, int64_t i2, int64_t i3, int64_t h0, int64_t h1)
{
    const size_t sx = a->x->nb[0], sy = a->y->nb[0];
    for (int64_t h = h0; h < h1; h++) {
        const char *rx = het_vec_row(a->x, h, i2, i3);
        char *ry = het_vec_row(a->y, h, i2, i3);
        for (int64_t e = a->n_dims; e < a->x->ne[0]; e++) *(float *)(ry + e * sy) = *(const float *)(rx + e * sx);
    }
}

void het_cpu_rope_token(const struct het_rope_args *a, int64_t i2, int64_t i3, int64_t h0, int64_t h1, int32_t pos)
{
    float cs[ROPE_CHUNK], sn[ROPE_CHUNK];
    float theta = (float)pos;
    const int n_pairs = a->n_dims / 2;
    for (int i0 = 0; i0 < n_pairs; i0 += ROPE_CHUNK) {
        int n = n_pairs - i0 < ROPE_CHUNK ? n_pairs - i0 : ROPE_CHUNK;
        for (int k = 0; k < n; k++) {
            float t = a->freq_scale * theta;
            cs[k] = cosf(t);
            sn[k] = sinf(t);
            theta *= a->theta_scale;
        }
        rope_apply_chunk(a, i2, i3, h0, h1, i0, n, cs, sn);
    }
    rope_pass_through(a, i2, i3, h0, h1);
}

enum het_status het_cpu_rope_args(struct het_tensor *dst, const struct het_tensor *x, struct het_rope_args *a)
{
    const struct het_tensor *pos = dst->src[1];
    if (!x || !pos) return HET_ERR_INVALID;
    if (x->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32 || pos->type != HET_TYPE_I32)
        return HET_ERR_UNSUPPORTED;
    const int n_dims = dst->op_params[0], mode = dst->op_params[1];
    if (!het_same_shape(x, dst) || n_dims < 0 || n_dims % 2 != 0 || n_dims > x->ne[0] || pos->ne[0] < x->ne[2])
        return HET_ERR_INVALID;
    if (mode != HET_ROPE_NORMAL && mode != HET_ROPE_NEOX) return HET_ERR_UNSUPPORTED;
    *a = (struct het_rope_args){
        .x = x, .y = dst, .pos = pos, .n_dims = n_dims, .neox = mode == HET_ROPE_NEOX,
        .theta_scale = n_dims ? powf(het_get_op_param_f32(dst, 2), -2.0f / (float)n_dims) : 1.0f,
        .freq_scale = het_get_op_param_f32(dst, 3),
    };
    return HET_OK;
}

void het_cpu_rope_parts(const struct het_compute_params *p, const struct het_rope_args *a, het_rope_heads_fn before,
                        const void *ctx)
{
    const struct het_tensor *x = a->x;
    const int64_t n_head = x->ne[1], n_tok = x->ne[2] * x->ne[3];

    /* parts of the tokens, or of the heads when there are fewer tokens than threads */
    const bool by_tok = n_tok >= p->nth;
    const int64_t units = by_tok ? n_tok : n_head;
    const int64_t np = het_cpu_n_parts(p, units, het_vec_part_rows(x->ne[0] * (by_tok ? n_head : n_tok)));
    for (int64_t k = het_cpu_part_first(p, np); k < np; k = het_cpu_part_next(p, np, k)) {
        int64_t t0 = 0, t1 = n_tok, h0 = 0, h1 = n_head;
        if (by_tok) het_vec_split(n_tok, (int)k, (int)np, &t0, &t1);
        else        het_vec_split(n_head, (int)k, (int)np, &h0, &h1);
        for (int64_t t = t0; t < t1 && h0 < h1; t++) {
            const int64_t i2 = t % x->ne[2], i3 = t / x->ne[2];
            if (before) before(ctx, i2, i3, h0, h1);
            const int32_t pos = *(const int32_t *)((const char *)a->pos->data + i2 * a->pos->nb[0]);
            het_cpu_rope_token(a, i2, i3, h0, h1, pos);
        }
    }
}

enum het_status het_cpu_rope(const struct het_compute_params *p, struct het_tensor *dst)
{
    struct het_rope_args a;
    const enum het_status st = het_cpu_rope_args(dst, dst->src[0], &a);
    if (st == HET_OK) het_cpu_rope_parts(p, &a, NULL, NULL);
    return st;
}
