/*
 * cmd_mkmodel.c — `hetrun mkmodel`: write a random-weight model of a real
 * architecture and shape (a preset or explicit flags), with the tokenizer of
 * any GGUF, so tests and benchmarks get real-sized models without downloads.
 */
#include "tools/hetrun.h"

#include "het/mkmodel.h"

#include <string.h>
#include <unistd.h>

#define MK_FLAGS "-o --arch --preset --vocab --type --output-type --n-layer --n-embd --n-head --n-head-kv " \
                 "--head-dim --n-ff --tied -c --seed -t"

/* a progress bar on a terminal; nothing when stderr is a file or a pipe */
static void progress(void *user, int64_t done, int64_t total, const char *tensor)
{
    (void)user;
    if (!isatty(2)) return;
    int width = 30, filled = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\rmkmodel [%.*s%*s] %lld/%lld %-32.32s", filled, "##############################", width - filled,
            "", (long long)done, (long long)total, tensor);
    if (done == total) fputc('\n', stderr);
}

static bool parse_type(const struct hr_opts *o, const char *flag, const char *name, enum het_type *out)
{
    enum het_type t = het_type_from_name(name);
    if (t == HET_TYPE_COUNT) {
        hr_error(o, "%s: unknown type '%s' (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k)", flag, name);
        return false;
    }
    *out = t;
    return true;
}

int cmd_mkmodel(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "mkmodel", MK_FLAGS, argc, argv)) return 2;
    if (!o.out) {
        hr_error(&o, "-o OUT is required");
        return 2;
    }
    struct het_mkmodel_params p;
    het_mkmodel_params_init(&p);
    if (o.preset && !het_mkmodel_params_preset(&p, o.preset)) {
        hr_error(&o, "--preset: unknown preset '%s'; presets:", o.preset);
        for (int i = 0; i < het_mkmodel_n_presets(); i++)
            fprintf(stderr, "  %-14s %s\n", het_mkmodel_preset(i)->name, het_mkmodel_preset(i)->description);
        return 2;
    }
    if (!o.preset) { /* a shape of one's own: every dimension given (-c: the training context it records) */
        char missing[160] = "";
        const struct { int given; const char *flag; } need[] = {
            { o.n_layer, "--n-layer" }, { o.n_embd, "--n-embd" }, { o.n_head, "--n-head" },
            { o.n_ff, "--n-ff" }, { o.n_ctx, "-c" },
        };
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
            if (!need[i].given) snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", need[i].flag);
        if (*missing) {
            hr_error(&o, "without --preset the shape must be given: missing%s (--n-head-kv defaults to --n-head)", missing);
            return 2;
        }
        if (!o.n_head_kv) o.n_head_kv = o.n_head;
    }
    p.path = o.out;
    if (o.arch) p.arch = o.arch;
    if (o.n_layer) p.n_layer = o.n_layer;
    if (o.n_embd) p.n_embd = o.n_embd;
    if (o.n_head) p.n_head = o.n_head;
    if (o.n_head_kv) p.n_head_kv = o.n_head_kv;
    if (o.head_dim) p.head_dim = o.head_dim;
    if (o.n_ff) p.n_ff = o.n_ff;
    if (o.n_ctx) p.n_ctx = o.n_ctx;
    if (o.tied) p.tied = true;
    if (o.threads) p.n_threads = o.threads;
    p.seed = o.seed;
    p.vocab_path = o.vocab;
    if (!p.vocab_path) {
        hr_error(&o, "--vocab FILE is required (any GGUF with a tokenizer, e.g. ../shared/models/synthetic/vocab-qwen3.gguf)");
        return 2;
    }
    if (o.wtype && !parse_type(&o, "--type", o.wtype, &p.type)) return 2;
    if (o.otype && !parse_type(&o, "--output-type", o.otype, &p.embd_type)) return 2;
    p.progress = progress;
    struct het_mkmodel_report rep;
    het_error err = { 0 };
    double t0 = hr_now_ms();
    if (het_mkmodel_write_report(&p, &rep, &err) != HET_OK) {
        hr_error(&o, "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "wrote %s: %s, %lld tensors, %.1fM parameters, %.1f MiB, vocab %lld, in %.1f s\n", o.out, p.arch,
            (long long)rep.n_tensors, rep.n_params / 1e6, rep.file_bytes / 1048576.0, (long long)rep.n_vocab,
            (hr_now_ms() - t0) / 1000);
    if (rep.n_fallback) fprintf(stderr, "type fallbacks (%d): %s\n", rep.n_fallback, rep.notes);
    return 0;
}
