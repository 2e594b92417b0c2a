/*
 * moe_route.c — CPU kernels for the small ops of expert routing (contracts
 * in het/graph.h):
 *   TOP_K    F32 rows -> I32 indices of the k largest, largest first, ties
 *            by lower index, NaN below every number;
 *   SUM_ROWS F32 rows -> their sums (accumulated in double);
 *   MOE_SUM  x (N, k, T), w (k, T) -> out[:, t] = sum_s w[s,t] x[:, s, t].
 * Every tensor is read and written through its byte strides. Threads split
 * the rows (TOP_K, SUM_ROWS) or the tokens (MOE_SUM).
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/vec.h"

static float route_load(const struct het_tensor *t, const char *row, int64_t i)
{
    float v;
    memcpy(&v, row + i * t->nb[0], sizeof v);
    return v;
}

/* a ranks before b: larger, or equal with a lower index; NaN last */
static bool route_before(float va, int64_t ia, float vb, int64_t ib)
{
    if (va != va) return false;       /* NaN never ranks before anything */
    if (vb != vb) return true;
    return va > vb || (va == vb && ia < ib);
}

enum het_status het_cpu_top_k(const struct het_compute_params *p, struct het_tensor *dst)
{
    const struct het_tensor *a = dst->src[0];
    if (!a || a->type != HET_TYPE_F32 || dst->type != HET_TYPE_I32) return HET_ERR_UNSUPPORTED;
    const int64_t n = a->ne[0], k = dst->ne[0];
    if (k < 1 || k > n || k > 1024 || dst->ne[1] != a->ne[1] || dst->ne[2] != a->ne[2] || dst->ne[3] != a->ne[3])
        return HET_ERR_INVALID;
    for (struct het_cpu_rows it = het_cpu_rows_begin(p, a); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const char *x = het_vec_row(a, i1, i2, i3);
        char *y = het_vec_row(dst, i1, i2, i3);
        /* insertion into a sorted list of the best k so far */
        int32_t best[1024];
        float bv[1024];
        int64_t nb = 0;
        for (int64_t i = 0; i < n; i++) {
            float v = route_load(a, x, i);
            if (nb == k && !route_before(v, i, bv[k - 1], best[k - 1])) continue;
            int64_t j = nb < k ? nb++ : k - 1;
            while (j > 0 && route_before(v, i, bv[j - 1], best[j - 1])) {
                bv[j] = bv[j - 1];
                best[j] = best[j - 1];
                j--;
            }
            bv[j] = v;
            best[j] = (int32_t)i;
        }
        for (int64_t j = 0; j < k; j++) memcpy(y + j * dst->nb[0], &best[j], sizeof(int32_t));
    }
    return HET_OK;
}

enum het_status het_cpu_sum_rows(const struct het_compute_params *p, struct het_tensor *dst)
{
    const struct het_tensor *a = dst->src[0];
    if (!a || a->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32) return HET_ERR_UNSUPPORTED;
    if (dst->ne[0] != 1 || dst->ne[1] != a->ne[1] || dst->ne[2] != a->ne[2] || dst->ne[3] != a->ne[3])
        return HET_ERR_INVALID;
    for (struct het_cpu_rows it = het_cpu_rows_begin(p, a); het_cpu_rows_next(&it);) {
        const int64_t i1 = it.i1, i2 = it.i2, i3 = it.i3;
        const char *x = het_vec_row(a, i1, i2, i3);
        double s = 0;
        for (int64_t i = 0; i < a->ne[0]; i++) s += route_load(a, x, i);
        float v = (float)s;
        memcpy(het_vec_row(dst, i1, i2, i3), &v, sizeof v);
    }
    return HET_OK;
}

enum het_status het_cpu_moe_sum(const struct het_compute_params *p, struct het_tensor *dst)
{
    const struct het_tensor *x = dst->src[0], *w = dst->src[1];
    if (!x || !w || x->type != HET_TYPE_F32 || w->type != HET_TYPE_F32 || dst->type != HET_TYPE_F32)
        return HET_ERR_UNSUPPORTED;
    const int64_t N = x->ne[0], k = x->ne[1], T = x->ne[2];
    if (w->ne[0] != k || w->ne[1] != T || dst->ne[0] != N || dst->ne[1] != T || dst->ne[2] != 1 ||
        dst->ne[3] != 1 || x->ne[3] != 1)
        return HET_ERR_INVALID;
    const bool dense = x->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    const int64_t units = T, np = het_cpu_n_parts(p, units, het_vec_part_rows(N * k));
    for (int64_t part = het_cpu_part_first(p, np); part < np; part = het_cpu_part_next(p, np, part)) {
        int64_t t0, t1;
        het_vec_split(units, (int)part, (int)np, &t0, &t1);
        for (int64_t t = t0; t < t1; t++) {
            char *y = (char *)dst->data + t * dst->nb[1];
            for (int64_t s = 0; s < k; s++) {
                float ws;
                memcpy(&ws, (const char *)w->data + s * w->nb[0] + t * w->nb[1], sizeof ws);
                const char *xs = (const char *)x->data + s * x->nb[1] + t * x->nb[2];
                if (dense && s == 0) {
                    het_vec_scale_f32(N, (float *)y, (const float *)xs, ws);
                } else if (dense) {
                    het_vec_mad_f32(N, (float *)y, (const float *)xs, ws);
                } else {
                    for (int64_t i = 0; i < N; i++) {
                        float xv, yv = 0;
                        memcpy(&xv, xs + i * x->nb[0], sizeof xv);
                        if (s) memcpy(&yv, y + i * dst->nb[0], sizeof yv);
                        yv += ws * xv;
                        memcpy(y + i * dst->nb[0], &yv, sizeof yv);
                    }
                }
            }
        }
    }
    return HET_OK;
}
