/*
 * npu_manifest.c — reading and validating an NPU kernel pack's
 * manifest.json (format in npu_manifest.h) with jansson, checking the files
 * it names, choosing a kernel for a shape, and loading a kernel's binaries.
 *
 * Every rejection is one line naming the file and the JSON field, e.g.
 * "manifest.json: kernels[0].weights: 'q5' is not one of q4, i8"; nothing is
 * trusted before it has been checked (types, ranges, unknown fields, file
 * magic and sizes).
 */
#include "devices/npu/npu_manifest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifdef HET_HAVE_JANSSON
#include <jansson.h>
#endif

#define MANIFEST "manifest.json"

/* ---- files ------------------------------------------------------------------- */

static enum het_status read_file(const char *path, size_t max, uint8_t **out, size_t *size, het_error *err)
{
    *out = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return het_error_set(err, HET_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size > max) {
        fclose(f);
        return het_error_set(err, HET_ERR_FORMAT, "%s: not a regular file of at most %zu bytes", path, max);
    }
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        fclose(f);
        return het_error_set(err, HET_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    if (n != (size_t)st.st_size) {
        free(buf);
        return het_error_set(err, HET_ERR_IO, "%s: short read", path);
    }
    buf[n] = 0;
    *out = buf;
    *size = n;
    return HET_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* ---- instruction streams and binaries ----------------------------------------- */

enum het_status npu_insts_parse(const uint8_t *data, size_t size, bool text, struct npu_kbin *out, het_error *err)
{
    free(out->insts);
    out->insts = NULL;
    out->n_insts = 0;
    if (!text) {
        if (size == 0 || size % 4)
            return het_error_set(err, HET_ERR_FORMAT, "instruction stream of %zu bytes is not whole u32 words", size);
        out->insts = malloc(size);
        if (!out->insts) return het_error_set(err, HET_ERR_NOMEM, "out of memory");
        memcpy(out->insts, data, size);
        out->n_insts = size / 4;
        return HET_OK;
    }
    size_t cap = size / 2 + 1, n = 0, line = 1;
    uint32_t *w = malloc(cap * sizeof *w);
    if (!w) return het_error_set(err, HET_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < size;) {
        while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r')) i++;
        if (i < size && data[i] == '\n') { i++; line++; continue; }
        if (i >= size) break;
        uint64_t v = 0;
        int digits = 0;
        if (i + 1 < size && data[i] == '0' && (data[i + 1] == 'x' || data[i + 1] == 'X')) i += 2;
        for (; i < size; i++, digits++) {
            const uint8_t ch = data[i];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                  : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
            if (d < 0) break;
            v = v * 16 + (uint64_t)d;
            if (v > 0xFFFFFFFFu) break;
        }
        while (i < size && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r')) i++;
        if (digits == 0 || digits > 8 || (i < size && data[i] != '\n')) {
            free(w);
            return het_error_set(err, HET_ERR_FORMAT, "instruction text line %zu is not one hex word", line);
        }
        w[n++] = (uint32_t)v;
    }
    if (n == 0) {
        free(w);
        return het_error_set(err, HET_ERR_FORMAT, "instruction stream is empty");
    }
    out->insts = w;
    out->n_insts = n;
    return HET_OK;
}

void npu_kbin_free(struct npu_kbin *b)
{
    if (!b) return;
    free(b->pdi);
    free(b->insts);
    memset(b, 0, sizeof *b);
}

enum het_status npu_kbin_load(const struct npu_kernel_desc *k, struct npu_kbin *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    uint8_t *buf;
    size_t size;
    enum het_status st = read_file(k->xclbin, (size_t)1 << 30, &buf, &size, err);
    if (st != HET_OK) return st;
    st = npu_xclbin_pdi(buf, size, out, err);
    free(buf);
    if (st != HET_OK) {
        het_error_prefix(err, "%s", k->xclbin);
        return st;
    }
    st = read_file(k->insts, (size_t)64 << 20, &buf, &size, err);
    if (st == HET_OK) {
        st = npu_insts_parse(buf, size, ends_with(k->insts, ".txt"), out, err);
        if (st != HET_OK) het_error_prefix(err, "%s", k->insts);
        free(buf);
    }
    if (st != HET_OK) npu_kbin_free(out);
    return st;
}

/* ---- choosing a kernel ------------------------------------------------------------ */

const struct npu_kernel_desc *npu_kpack_find(const struct npu_kpack *p, enum het_npu_wfmt wfmt, enum het_npu_act act,
                                             int64_t act_group, int64_t K, int64_t Npad, int64_t M)
{
    const struct npu_kernel_desc *best = NULL;
    for (int i = 0; p && i < p->n; i++) {
        const struct npu_kernel_desc *k = &p->k[i];
        if (k->wfmt != wfmt || k->act != act || k->act_group != act_group || k->K != K || k->N != Npad) continue;
        if (!best) { best = k; continue; }
        const bool k_fits = k->m_tile <= M, b_fits = best->m_tile <= M;
        if (M == 1 ? k->m_tile < best->m_tile
                   : (k_fits && (!b_fits || k->m_tile > best->m_tile)) || (!k_fits && !b_fits && k->m_tile < best->m_tile))
            best = k;
    }
    return best;
}

void npu_kpack_free(struct npu_kpack *p)
{
    if (!p) return;
    free(p->k);
    memset(p, 0, sizeof *p);
}

#ifdef HET_HAVE_JANSSON

/* ---- JSON field helpers ------------------------------------------------------------- */

static enum het_status ferr(het_error *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static enum het_status ferr(het_error *err, const char *path, const char *fmt, ...)
{
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return het_error_set(err, HET_ERR_FORMAT, MANIFEST ": %s: %s", path, msg);
}

static enum het_status check_keys(json_t *obj, const char *path, const char *const *allowed, het_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool ok = false;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(key, allowed[i]) == 0;
        if (!ok) return ferr(err, path, "unknown field '%.64s'", key);
    }
    return HET_OK;
}

static enum het_status get_str(json_t *obj, const char *key, const char *path, bool required, char *out, size_t cap,
                               het_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required) return ferr(err, path, "field '%s' is missing", key);
        return HET_OK;
    }
    if (!json_is_string(v)) return ferr(err, path, "'%s' must be a string", key);
    const char *s = json_string_value(v);
    if (!*s || strlen(s) >= cap) return ferr(err, path, "'%s' must be 1..%zu characters", key, cap - 1);
    snprintf(out, cap, "%s", s);
    return HET_OK;
}

static enum het_status get_int(json_t *obj, const char *key, const char *path, bool required, int64_t lo, int64_t hi,
                               int64_t *out, het_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) return required ? ferr(err, path, "field '%s' is missing", key) : HET_OK;
    if (!json_is_integer(v)) return ferr(err, path, "'%s' must be an integer", key);
    const json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return ferr(err, path, "'%s' = %lld is outside %lld..%lld", key, (long long)x, (long long)lo,
                                      (long long)hi);
    *out = (int64_t)x;
    return HET_OK;
}

/* One of a fixed set of words; *idx receives its position. */
static enum het_status get_enum(json_t *obj, const char *key, const char *path, bool required, const char *const *words,
                                int *idx, het_error *err)
{
    char s[32] = "";
    enum het_status st = get_str(obj, key, path, required, s, sizeof s, err);
    if (st != HET_OK || !s[0]) return st;
    char list[128] = "";
    for (int i = 0; words[i]; i++) {
        if (strcmp(s, words[i]) == 0) {
            *idx = i;
            return HET_OK;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", words[i]);
    }
    return ferr(err, path, "'%s' = '%s' is not one of %s", key, s, list);
}

static enum het_status check_file(const char *dir, const char *name, const char *path, const char *key, bool xclbin,
                                  char *out, size_t cap, het_error *err)
{
    int n = name[0] == '/' ? snprintf(out, cap, "%s", name) : snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return ferr(err, path, "'%s': path too long", key);
    struct stat st;
    if (stat(out, &st) != 0) return ferr(err, path, "'%s': %s: %s", key, out, strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size <= 0) return ferr(err, path, "'%s': %s is not a non-empty file", key, out);
    if (xclbin) {
        char magic[8] = {0};
        FILE *f = fopen(out, "rb");
        size_t got = f ? fread(magic, 1, 8, f) : 0;
        if (f) fclose(f);
        if (got != 8 || memcmp(magic, "xclbin2\0", 8) != 0)
            return ferr(err, path, "'%s': %s is not an xclbin (magic \"xclbin2\" missing)", key, out);
    } else if (!ends_with(out, ".txt") && st.st_size % 4) {
        return ferr(err, path, "'%s': %s has %lld bytes, not whole u32 words", key, out, (long long)st.st_size);
    }
    return HET_OK;
}

static enum het_status parse_arg(const char *s, const char *path, struct npu_karg *a, het_error *err)
{
    static const struct { const char *word; enum npu_argkind kind; } plain[] = {
        {"instr", NPU_ARG_INSTR}, {"ninstr", NPU_ARG_NINSTR}, {"act", NPU_ARG_ACT},
        {"weights", NPU_ARG_WEIGHTS}, {"out", NPU_ARG_OUT}, {"act_group", NPU_ARG_ACT_GROUP},
    };
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (strcmp(s, plain[i].word) == 0) { a->kind = plain[i].kind; a->value = 0; return HET_OK; }
    static const struct { const char *prefix; enum npu_argkind kind; uint64_t max; } lit[] = {
        {"opcode:", NPU_ARG_OPCODE, UINT64_MAX}, {"u32:", NPU_ARG_U32, UINT32_MAX}, {"u64:", NPU_ARG_U64, UINT64_MAX},
    };
    for (size_t i = 0; i < sizeof lit / sizeof lit[0]; i++) {
        size_t n = strlen(lit[i].prefix);
        if (strncmp(s, lit[i].prefix, n) != 0) continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s + n, &end, 0);
        if (errno || end == s + n || *end || v > lit[i].max) return ferr(err, path, "bad number in '%.48s'", s);
        a->kind = lit[i].kind;
        a->value = v;
        return HET_OK;
    }
    return ferr(err, path, "'%.48s' is not an argument (opcode:N, instr, ninstr, act, weights, out, act_group, "
                "u32:N, u64:N)", s);
}

static enum het_status parse_args(json_t *k, const char *path, struct npu_kernel_desc *d, het_error *err)
{
    static const char *const dflt[] = {"opcode:3", "instr", "ninstr", "act", "weights", "out"};
    json_t *a = json_object_get(k, "args");
    char ap[96];
    snprintf(ap, sizeof ap, "%s.args", path);
    if (a && (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > NPU_MAX_KARGS))
        return ferr(err, ap, "must be an array of 1..%d strings", NPU_MAX_KARGS);
    d->n_args = a ? (int)json_array_size(a) : 6;
    int seen[NPU_ARG_ACT_GROUP + 1] = {0};
    for (int i = 0; i < d->n_args; i++) {
        char ep[112];
        snprintf(ep, sizeof ep, "%s[%d]", ap, i);
        json_t *v = a ? json_array_get(a, (size_t)i) : NULL;
        if (a && !json_is_string(v)) return ferr(err, ep, "must be a string");
        enum het_status st = parse_arg(a ? json_string_value(v) : dflt[i], ep, &d->args[i], err);
        if (st != HET_OK) return st;
        seen[d->args[i].kind]++;
    }
    if (seen[NPU_ARG_ACT] != 1 || seen[NPU_ARG_WEIGHTS] != 1 || seen[NPU_ARG_OUT] != 1)
        return ferr(err, ap, "must name act, weights and out exactly once each");
    if (seen[NPU_ARG_ACT_GROUP] && d->act != HET_NPU_ACT_INT8)
        return ferr(err, ap, "'act_group' is an argument of int8 kernels only");
    return HET_OK;
}

/* int8 kernels: version 2 states the activation group (32 or k); version 1
 * predates the field and its kernels are per-row (group k). bf16: none. */
static enum het_status parse_act_group(json_t *k, const char *path, int64_t version, struct npu_kernel_desc *d,
                                       het_error *err)
{
    json_t *v = json_object_get(k, "act_group");
    if (v && version < 2) return ferr(err, path, "'act_group' needs \"version\": 2 (version 1 kernels are per-row)");
    if (d->act != HET_NPU_ACT_INT8) {
        if (v) return ferr(err, path, "'act_group' applies to int8 kernels only");
        d->act_group = 0;
        return HET_OK;
    }
    if (version < 2) {
        d->act_group = d->K;
        return HET_OK;
    }
    enum het_status st = get_int(k, "act_group", path, true, 1, (int64_t)1 << 28, &d->act_group, err);
    if (st == HET_OK && d->act_group != HET_NPU_ACT_GROUP_32 && d->act_group != d->K)
        st = ferr(err, path, "'act_group' = %lld is neither 32 nor k (%lld)", (long long)d->act_group, (long long)d->K);
    return st;
}

static enum het_status parse_kernel(json_t *k, int i, int64_t version, const char *dir, struct npu_kernel_desc *d,
                                    het_error *err)
{
    static const char *const keys[] = {"name", "op", "weights", "act", "act_group", "m_tile", "k", "n", "xclbin",
                                       "insts", "kernel", "tiles", "args", NULL};
    static const char *const ops[] = {"matmul", NULL}, *const wf[] = {"q4", "i8", NULL}, *const acts[] = {"int8", "bf16", NULL};
    char path[48];
    snprintf(path, sizeof path, "kernels[%d]", i);
    if (!json_is_object(k)) return ferr(err, path, "must be an object");
    memset(d, 0, sizeof *d);
    int op = 0, w = 0, act = 0;
    int64_t tiles = 0;
    char xname[PATH_MAX / 2] = "", iname[PATH_MAX / 2] = "";
    enum het_status st = check_keys(k, path, keys, err);
    if (st == HET_OK) st = get_str(k, "name", path, true, d->name, sizeof d->name, err);
    if (st == HET_OK) st = get_enum(k, "op", path, true, ops, &op, err);
    if (st == HET_OK) st = get_enum(k, "weights", path, true, wf, &w, err);
    if (st == HET_OK) st = get_enum(k, "act", path, false, acts, &act, err);
    if (st == HET_OK) st = get_int(k, "m_tile", path, true, 1, 128, &d->m_tile, err);
    if (st == HET_OK) st = get_int(k, "k", path, true, 32, (int64_t)1 << 28, &d->K, err);
    if (st == HET_OK) st = get_int(k, "n", path, true, 32, (int64_t)1 << 28, &d->N, err);
    if (st == HET_OK) st = get_int(k, "tiles", path, false, 1, 64, &tiles, err);
    if (st == HET_OK) st = get_str(k, "kernel", path, false, d->kernel_name, sizeof d->kernel_name, err);
    if (st == HET_OK) st = get_str(k, "xclbin", path, true, xname, sizeof xname, err);
    if (st == HET_OK) st = get_str(k, "insts", path, true, iname, sizeof iname, err);
    if (st != HET_OK) return st;
    if (d->K % HET_NPU_GROUP) return ferr(err, path, "'k' = %lld is not a multiple of %d", (long long)d->K, HET_NPU_GROUP);
    if (d->N % HET_NPU_NTILE) return ferr(err, path, "'n' = %lld is not a multiple of %d", (long long)d->N, HET_NPU_NTILE);
    d->wfmt = w == 0 ? HET_NPU_W_Q4 : HET_NPU_W_I8;
    d->act = act == 0 ? HET_NPU_ACT_INT8 : HET_NPU_ACT_BF16;
    d->tiles = (uint32_t)tiles;
    st = parse_act_group(k, path, version, d, err);
    if (st == HET_OK) st = parse_args(k, path, d, err);
    if (st == HET_OK) st = check_file(dir, xname, path, "xclbin", true, d->xclbin, sizeof d->xclbin, err);
    if (st == HET_OK) st = check_file(dir, iname, path, "insts", false, d->insts, sizeof d->insts, err);
    return st;
}

static enum het_status parse_top(json_t *root, const char *dir, struct npu_kpack *out, het_error *err)
{
    static const char *const keys[] = {"format", "version", "device", "switch_us", "kernels", NULL};
    static const char *const devs[] = {"xdna1", "xdna2", "any", NULL};
    if (!json_is_object(root)) return ferr(err, "top level", "must be an object");
    char fmt[32] = "";
    int64_t version = 0;
    int dev = 2;
    enum het_status st = check_keys(root, "top level", keys, err);
    if (st == HET_OK) st = get_str(root, "format", "top level", true, fmt, sizeof fmt, err);
    if (st == HET_OK && strcmp(fmt, "het-npu-kernels") != 0)
        return ferr(err, "format", "'%s' is not \"het-npu-kernels\"", fmt);
    if (st == HET_OK) st = get_int(root, "version", "top level", true, 1, 1000, &version, err);
    if (st == HET_OK && version != 1 && version != 2)
        return ferr(err, "version", "%lld is not supported (1, 2)", (long long)version);
    if (st == HET_OK) st = get_enum(root, "device", "top level", false, devs, &dev, err);
    if (st != HET_OK) return st;
    snprintf(out->device, sizeof out->device, "%s", devs[dev]);
    out->switch_us = -1.0;
    json_t *sw = json_object_get(root, "switch_us");
    if (sw) {
        if (!json_is_number(sw) || json_number_value(sw) < 0 || json_number_value(sw) > 1e7)
            return ferr(err, "switch_us", "must be a number of microseconds in 0..1e7");
        out->switch_us = json_number_value(sw);
    }
    json_t *ks = json_object_get(root, "kernels");
    if (!ks || !json_is_array(ks) || json_array_size(ks) == 0 || json_array_size(ks) > 4096)
        return ferr(err, "kernels", "must be an array of 1..4096 kernels");
    out->n = (int)json_array_size(ks);
    out->k = calloc((size_t)out->n, sizeof *out->k);
    if (!out->k) return het_error_set(err, HET_ERR_NOMEM, MANIFEST ": out of memory");
    for (int i = 0; i < out->n; i++) {
        st = parse_kernel(json_array_get(ks, (size_t)i), i, version, dir, &out->k[i], err);
        if (st != HET_OK) return st;
        for (int j = 0; j < i; j++)
            if (strcmp(out->k[j].name, out->k[i].name) == 0) {
                char path[48];
                snprintf(path, sizeof path, "kernels[%d].name", i);
                return ferr(err, path, "'%s' repeats kernels[%d]", out->k[i].name, j);
            }
    }
    return HET_OK;
}

enum het_status npu_kpack_parse(const char *json, size_t len, const char *dir, struct npu_kpack *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->dir, sizeof out->dir, "%s", dir ? dir : ".");
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return het_error_set(err, HET_ERR_FORMAT, MANIFEST ": line %d column %d: %s", je.line, je.column, je.text);
    enum het_status st = parse_top(root, out->dir, out, err);
    json_decref(root);
    if (st != HET_OK) npu_kpack_free(out);
    return st;
}

#else /* no jansson */

enum het_status npu_kpack_parse(const char *json, size_t len, const char *dir, struct npu_kpack *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    return het_error_set(err, HET_ERR_UNSUPPORTED, "npu: kernel packs need jansson (this build has none)");
}

#endif

enum het_status npu_kpack_load(const char *dir, struct npu_kpack *out, het_error *err)
{
    memset(out, 0, sizeof *out);
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/" MANIFEST, dir) >= (int)sizeof path)
        return het_error_set(err, HET_ERR_INVALID, "npu: kernel pack path too long");
    uint8_t *buf;
    size_t size;
    enum het_status st = read_file(path, (size_t)16 << 20, &buf, &size, err);
    if (st != HET_OK) return st;
    st = npu_kpack_parse((const char *)buf, size, dir, out, err);
    free(buf);
    if (st != HET_OK) het_error_prefix(err, "%s", dir);
    return st;
}
