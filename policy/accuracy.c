/*
 * accuracy.c — comparing two runs' logits (see het/accuracy.h): per
 * position KL(p_ref || p_test) of the softmaxes, computed in double from
 * log-softmaxes so that tiny differences are not lost to rounding, and
 * top-1 agreement; and evaluating a token sequence on a context to get the
 * logits of every position, in chunks of a chosen size so that the graphs
 * (and their placement) are the ones a plan was made for: one token per
 * eval for decode, the planned batch for prefill.
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
                                    int32_t chunk, float *out, het_error *err)
{
    if (n <= 0 || n_vocab <= 0)
        return het_error_set(err, HET_ERR_INVALID, "accuracy: %d tokens of a %d-token vocabulary", n, n_vocab);
    if (het_context_n_ctx(ctx) < n)
        return het_error_set(err, HET_ERR_INVALID, "accuracy: %d tokens do not fit the context (n_ctx %d)", n,
                             het_context_n_ctx(ctx));
    het_context_reset(ctx);
    if (chunk <= 0 || chunk > n) chunk = n;
    for (int32_t i = 0; i < n; i += chunk) {
        const int32_t m = n - i < chunk ? n - i : chunk;
        enum het_status st = het_context_eval(ctx, tokens + i, m, true, err);
        if (st != HET_OK) {
            het_error_prefix(err, "accuracy: positions %d..%d", i, i + m - 1);
            return st;
        }
        int32_t n_out = 0;
        const float *l = het_context_logits(ctx, &n_out);
        if (!l || n_out != m)
            return het_error_set(err, HET_ERR_INVALID, "accuracy: %d rows of logits for %d tokens at position %d",
                                 n_out, m, i);
        memcpy(out + (size_t)i * (size_t)n_vocab, l, (size_t)m * (size_t)n_vocab * sizeof(float));
    }
    return HET_OK;
}
