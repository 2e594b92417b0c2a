/*
 * bench_act_error.c — what the CPU's 8-bit activations cost at the logits.
 *
 * The CPU's quantised matmuls run on int8 activations by default (as
 * llama.cpp's do); --f32-activations keeps them in F32 against the same
 * weights. This evaluates one prompt of n random tokens both ways, on the
 * CPU alone, as prefill graphs of `chunk` tokens (0: one graph; 1: decode
 * graphs), and prints the mean and largest KL(p_f32 || p_int8) per
 * position, how often the top-1 tokens agree, and the relative RMS
 * difference of the logits. The CPU level is the machine's best unless
 * HET_CPU_ISA says otherwise.
 *
 *   bench_act_error MODEL [-n tokens] [-c chunk] [-t threads] [-s seed]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "het/accuracy.h"
#include "het/session.h"

static float *logits_of(const char *path, bool f32, int threads, const int32_t *tok, int n, int chunk,
                        int32_t *n_vocab)
{
    het_error err = { 0 };
    struct het_session_params p = { .model_path = path, .devices = "cpu", .n_threads = threads,
                                    .f32_activations = f32, .all_logits = chunk != 1, .n_ctx = n,
                                    .open_context = true };
    het_session *s = het_session_open(&p, &err);
    if (!s) {
        fprintf(stderr, "bench_act_error: %s\n", err.msg);
        return NULL;
    }
    *n_vocab = het_model_get_config(het_session_model(s))->n_vocab;
    float *out = malloc(sizeof(float) * (size_t)n * (size_t)*n_vocab);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; out && ids && i < n; i++) ids[i] = tok[i] % *n_vocab;
    if (!out || !ids ||
        het_accuracy_logits(het_session_context(s), *n_vocab, ids, n, chunk, out, &err) != HET_OK) {
        fprintf(stderr, "bench_act_error: %s\n", out && ids ? err.msg : "out of memory");
        free(out);
        out = NULL;
    }
    free(ids);
    het_session_close(s);
    return out;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL [-n tokens] [-c chunk] [-t threads] [-s seed]\n", argv[0]);
        return 2;
    }
    int n = 128, chunk = 0, threads = 0;
    unsigned seed = 1;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) chunk = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) seed = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "bench_act_error: unknown flag '%s'\n", argv[i]);
            return 2;
        }
    }
    if (n < 1 || n > 8192) {
        fprintf(stderr, "bench_act_error: -n: %d is not in 1..8192\n", n);
        return 2;
    }
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n), nv = 0, nv2 = 0;
    if (!tok) return 1;
    uint64_t r = 0x9E3779B97F4A7C15ull ^ seed;
    for (int i = 0; i < n; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        tok[i] = (int32_t)(r % 1000000u);
    }
    float *ref = logits_of(argv[1], true, threads, tok, n, chunk, &nv);
    float *q = ref ? logits_of(argv[1], false, threads, tok, n, chunk, &nv2) : NULL;
    if (!ref || !q) return 1;
    struct het_accuracy acc;
    het_accuracy_compare(ref, q, n, nv, &acc, NULL, NULL);
    double se = 0, sr = 0;
    for (size_t i = 0; i < (size_t)n * (size_t)nv; i++) {
        const double d = (double)q[i] - ref[i];
        se += d * d;
        sr += (double)ref[i] * ref[i];
    }
    const char *isa = getenv("HET_CPU_ISA");
    printf("%s: %d positions (chunk %d), cpu level %s: int8 vs F32 activations: KL mean %.3e max %.3e (pos %d), "
           "top-1 agree %d/%d, logits rel RMS diff %.4f\n",
           argv[1], n, chunk, isa ? isa : "best", acc.kl_mean, acc.kl_max, acc.kl_max_pos, acc.n_agree, n,
           sr > 0 ? sqrt(se / sr) : 0.0);
    free(ref);
    free(q);
    free(tok);
    return 0;
}
