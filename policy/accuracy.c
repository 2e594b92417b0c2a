/*
 * accuracy.c — comparing two runs' logits (see het/accuracy.h): per
 * position KL(p_ref || p_test) of the softmaxes, computed in double from
 * log-softmaxes so that tiny differences are not lost to rounding, and
 * top-1 agreement; and evaluating a token sequence on a context to get the
 * logits of every position (one batch, or one token per eval so that the
 * decode graphs and their placement are the ones exercised).
 */
#include "het/accuracy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* log of sum(exp(x - max)) and max, over n floats; false when one is not finite */
static bool log_sum_exp(const float *x, int32_t n, double *max_out, double *lse_out)
{
    double mx = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return false;
        if (x[i] > mx) mx = x[i];
    }
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += exp((double)x[i] - mx);
    *max_out = mx;
    *lse_out = log(s);
    return true;
}

double het_accuracy_kl(const float *ref, const float *test, int32_t n)
{
    double mr, lr, mt, lt;
    if (n <= 0 || !log_sum_exp(ref, n, &mr, &lr)) return NAN;
    if (!log_sum_exp(test, n, &mt, &lt)) return INFINITY;
    double kl = 0;
    for (int32_t i = 0; i < n; i++) {
        double a = (double)ref[i] - mr - lr, b = (double)test[i] - mt - lt;
        kl += exp(a) * (a - b);
    }
    return kl > 0 ? kl : 0; /* rounding can leave -1e-17 for identical rows */
}

static int32_t argmax(const float *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void het_accuracy_compare(const float *ref, const float *test, int32_t n_pos, int32_t n_vocab,
                          struct het_accuracy *out, double *kl, int32_t *top)
{
    memset(out, 0, sizeof *out);
    out->n_positions = n_pos;
    out->kl_max = -INFINITY;
    double sum = 0;
    for (int32_t p = 0; p < n_pos; p++) {
        const float *r = ref + (size_t)p * (size_t)n_vocab, *t = test + (size_t)p * (size_t)n_vocab;
        int32_t ar = argmax(r, n_vocab), at = argmax(t, n_vocab);
        double k = het_accuracy_kl(r, t, n_vocab);
        out->n_agree += ar == at;
        sum += k;
        if (!(k <= out->kl_max)) { /* NAN propagates to the max too */
            out->kl_max = k;
            out->kl_max_pos = p;
        }
        if (kl) kl[p] = k;
        if (top) {
            top[2 * p] = ar;
            top[2 * p + 1] = at;
        }
    }
    out->top1 = n_pos > 0 ? (double)out->n_agree / n_pos : NAN;
    out->kl_mean = n_pos > 0 ? sum / n_pos : NAN;
    if (n_pos == 0) out->kl_max = NAN;
}

enum het_status het_accuracy_logits(het_context *ctx, int32_t n_vocab, const int32_t *tokens, int32_t n,
                                    bool one_by_one, float *out, het_error *err)
{
    if (n <= 0 || n_vocab <= 0)
        return het_error_set(err, HET_ERR_INVALID, "accuracy: %d tokens of a %d-token vocabulary", n, n_vocab);
    if (het_context_n_ctx(ctx) < n)
        return het_error_set(err, HET_ERR_INVALID, "accuracy: %d tokens do not fit the context (n_ctx %d)", n,
                             het_context_n_ctx(ctx));
    het_context_reset(ctx);
    const size_t row = (size_t)n_vocab * sizeof(float);
    int32_t n_out = 0;
    if (!one_by_one) {
        enum het_status st = het_context_eval(ctx, tokens, n, true, err);
        if (st != HET_OK) return st;
        const float *l = het_context_logits(ctx, &n_out);
        if (!l || n_out != n)
            return het_error_set(err, HET_ERR_INVALID, "accuracy: %d rows of logits for %d tokens", n_out, n);
        memcpy(out, l, (size_t)n * row);
        return HET_OK;
    }
    for (int32_t i = 0; i < n; i++) {
        enum het_status st = het_context_eval(ctx, tokens + i, 1, false, err);
        if (st != HET_OK) {
            het_error_prefix(err, "accuracy: position %d", i);
            return st;
        }
        const float *l = het_context_logits(ctx, &n_out);
        if (!l || n_out < 1) return het_error_set(err, HET_ERR_INVALID, "accuracy: no logits at position %d", i);
        memcpy(out + (size_t)i * (size_t)n_vocab, l + (size_t)(n_out - 1) * (size_t)n_vocab, row);
    }
    return HET_OK;
}
