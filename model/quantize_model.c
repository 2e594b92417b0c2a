/*
 * quantize_model.c — re-encode a GGUF model's weights (see quantize.h).
 */
#include "het/quantize.h"

#include "het/gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void note(struct het_quantize_report *r, const char *fmt, const char *name, const char *type, long long ne0)
{
    size_t n = strlen(r->notes);
    if (n + 80 < sizeof r->notes) snprintf(r->notes + n, sizeof r->notes - n, fmt, name, type, ne0);
}

/* Convert one tensor (rows of ne0) from its type to `type` via F32. */
static enum het_status convert(const struct het_gguf_tensor_info *t, enum het_type type, void *dst, het_error *err)
{
    int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
    float *row = malloc((size_t)t->ne[0] * sizeof *row);
    if (!row) return het_error_set(err, HET_ERR_NOMEM, "quantize: out of memory");
    size_t src_rs = het_type_row_size(t->type, t->ne[0]), dst_rs = het_type_row_size(type, t->ne[0]);
    enum het_status st = HET_OK;
    for (int64_t r = 0; r < rows && st == HET_OK; r++) {
        st = het_dequantize_row(t->type, (const char *)t->data + r * src_rs, row, t->ne[0]);
        if (st == HET_OK) st = het_quantize_row(type, row, (char *)dst + r * dst_rs, t->ne[0]);
    }
    free(row);
    if (st != HET_OK) het_error_set(err, st, "quantize: tensor '%s': %s -> %s failed", t->name, het_type_name(t->type),
                                    het_type_name(type));
    return st;
}

enum het_status het_quantize_model(const char *in_path, const char *out_path, enum het_type type,
                                   struct het_quantize_report *report, het_error *err)
{
    struct het_quantize_report local;
    struct het_quantize_report *r = report ? report : &local;
    memset(r, 0, sizeof *r);
    if ((unsigned)type >= HET_TYPE_COUNT || !het_type_get_traits(type)->can_compute)
        return het_error_set(err, HET_ERR_INVALID, "quantize: cannot write type %s", het_type_name(type));
    het_gguf *g = het_gguf_open(in_path, err);
    if (!g) return err ? err->status : HET_ERR_IO;
    het_gguf_writer *w = het_gguf_writer_init();
    enum het_status st = w ? HET_OK : het_error_set(err, HET_ERR_NOMEM, "quantize: out of memory");
    for (int64_t i = 0; st == HET_OK && i < het_gguf_n_kv(g); i++) st = het_gguf_writer_copy_kv(w, g, i);
    int64_t blck = het_type_get_traits(type)->blck_size;
    for (int64_t i = 0; st == HET_OK && i < het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        bool matrix = t->n_dims >= 2 && t->ne[1] > 1;
        bool fits = t->ne[0] % blck == 0 && het_type_get_traits(t->type)->can_compute;
        if (!matrix || !fits || t->type == type) {
            if (matrix && !fits) note(r, "%s: kept %s (ne0 %lld); ", t->name, het_type_name(t->type), (long long)t->ne[0]);
            r->n_kept++;
            st = het_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
            continue;
        }
        size_t bytes = het_type_row_size(type, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        void *buf = malloc(bytes ? bytes : 1);
        if (!buf) {
            st = het_error_set(err, HET_ERR_NOMEM, "quantize: out of memory for '%s'", t->name);
            break;
        }
        st = convert(t, type, buf, err);
        if (st == HET_OK) st = het_gguf_writer_add_tensor(w, t->name, type, t->n_dims, t->ne, buf);
        free(buf);
        r->n_converted++;
    }
    if (st == HET_OK) st = het_gguf_writer_set_u32(w, "general.file_type", 0); /* not a llama.cpp ftype mix */
    if (st == HET_OK) st = het_gguf_writer_write(w, out_path, err);
    het_gguf_writer_free(w);
    het_gguf_close(g);
    return st;
}
