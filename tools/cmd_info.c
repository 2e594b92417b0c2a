/*
 * cmd_info.c — `hetrun info`: a GGUF file's metadata, the hyperparameters het
 * derives from it, and its tensor table.
 */
#include "tools/hetrun.h"

#include "het/gguf.h"

int cmd_info(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "info", "-m", argc, argv)) return 2;
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(o.model, &err);
    if (!g) {
        hr_error(&o, "%s", err.msg);
        return 1;
    }
    size_t fsize = 0;
    het_gguf_file_data(g, &fsize);
    printf("file: %s (%zu bytes, GGUF v%u, alignment %zu, data at offset %llu)\n", o.model, fsize,
           het_gguf_version(g), het_gguf_alignment(g), (unsigned long long)het_gguf_data_offset(g));
    printf("\nmetadata (%lld keys):\n", (long long)het_gguf_n_kv(g));
    char buf[512];
    for (int64_t i = 0; i < het_gguf_n_kv(g); i++) {
        het_gguf_kv_format(g, i, buf, sizeof buf);
        printf("  %-45s %-8s %s\n", het_gguf_kv_key(g, i), het_gguf_type_name(het_gguf_kv_type(g, i)), buf);
    }
    het_model *m = het_model_load(o.model, &err);
    if (m) {
        const struct het_model_config *c = het_model_get_config(m);
        printf("\nhyperparameters (%s):\n", c->arch_name);
        printf("  n_vocab %d, n_ctx_train %d, n_embd %d, n_layer %d, n_head %d, n_head_kv %d, head_dim %d, n_ff %d\n",
               c->n_vocab, c->n_ctx_train, c->n_embd, c->n_layer, c->n_head, c->n_head_kv, c->head_dim, c->n_ff);
        printf("  rope: %d dims, %s pairing, base %g, freq scale %g; rms eps %g; output %s\n", c->n_rot,
               c->rope_mode == 2 ? "neox" : "normal", c->rope_base, c->rope_scale, c->rms_eps,
               c->tied_output ? "tied to token_embd" : "separate");
        printf("  weights: %.2f MiB\n", het_model_weight_bytes(m) / 1048576.0);
        het_model_free(m);
    } else {
        printf("\nnot runnable by het: %s\n", err.msg);
    }
    printf("\ntensors (%lld):\n", (long long)het_gguf_n_tensors(g));
    for (int64_t i = 0; i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[%lld", (long long)t->ne[0]);
        for (int d = 1; d < t->n_dims; d++) n += snprintf(shape + n, sizeof shape - (size_t)n, ", %lld", (long long)t->ne[d]);
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-32s %-6s %-22s %12zu bytes at +%llu\n", t->name, het_type_name(t->type), shape, t->size,
               (unsigned long long)t->offset);
    }
    het_gguf_close(g);
    return 0;
}
