/*
 * gguf_write.c — the GGUF v3 writer.
 *
 * Keys are kept in insertion order, each already serialised (type id and
 * payload bytes exactly as they go into the file), so copying a key from a
 * reader, replacing one and writing are all byte operations. Tensors keep
 * their shape, type and (optionally) a private copy of their data; tensors
 * without data can be produced at write time by a fill callback (see
 * gguf_writer_stream.h), which lets mkmodel emit multi-GB models one tensor
 * at a time. Layout: header, keys, tensor infos, padding to the alignment,
 * then each tensor's data padded to the alignment.
 */
#include "het/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf_internal.h"
#include "model/gguf_writer_stream.h"

/* Numeric arrays and tensor data are copied as is: the host must be little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF I/O assumes a little-endian host");

#define GGUF_VERSION           3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_NAME          64   /* llama.cpp rejects tensor names this long or longer */

struct wkv {
    char              *key;
    enum het_gguf_type type;
    unsigned char     *payload;     /* serialised value (after the type id) */
    size_t             size;
};

struct wtensor {
    char         *name;
    enum het_type type;
    int           n_dims;
    int64_t       ne[4];
    size_t        size;
    void         *data;             /* owned copy, or NULL until set */
    uint64_t      offset;           /* assigned at write time        */
};

struct het_gguf_writer {
    struct wkv     *kv;
    int64_t         n_kv, cap_kv;
    struct wtensor *t;
    int64_t         n_t, cap_t;
};

/* ---- growable byte buffer for payloads ------------------------------------ */

struct bytes {
    unsigned char *p;
    size_t         len, cap;
    bool           oom;
};

static void bytes_put(struct bytes *b, const void *src, size_t n)
{
    if (b->oom) return;
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

/* little-endian host assumed (x86-64, aarch64), as in the reader */
static void bytes_u32(struct bytes *b, uint32_t v) { bytes_put(b, &v, 4); }
static void bytes_u64(struct bytes *b, uint64_t v) { bytes_put(b, &v, 8); }
static void bytes_str(struct bytes *b, const char *s, size_t n)
{
    bytes_u64(b, n);
    bytes_put(b, s, n);
}

/* ---- writer lifetime ------------------------------------------------------- */

het_gguf_writer *het_gguf_writer_init(void) { return calloc(1, sizeof(het_gguf_writer)); }

void het_gguf_writer_free(het_gguf_writer *w)
{
    if (!w) return;
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].payload);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->kv);
    free(w->t);
    free(w);
}

static int64_t find_kv(const het_gguf_writer *w, const char *key)
{
    for (int64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return i;
    return -1;
}

static int64_t find_tensor(const het_gguf_writer *w, const char *name)
{
    for (int64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return i;
    return -1;
}

static bool grow(void **arr, int64_t *cap, int64_t n, size_t elem)
{
    if (n < *cap) return true;
    int64_t c = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)c * elem);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

/* Store key with type and payload (taking ownership of payload). */
static enum het_status set_payload(het_gguf_writer *w, const char *key, enum het_gguf_type type, struct bytes *b)
{
    if (b->oom) {
        free(b->p);
        return HET_ERR_NOMEM;
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kv[i].payload);
    } else {
        char *k = strdup(key);
        if (!k || !grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
            free(k);
            free(b->p);
            return HET_ERR_NOMEM;
        }
        i = w->n_kv++;
        w->kv[i].key = k;
    }
    w->kv[i].type    = type;
    w->kv[i].payload = b->p;
    w->kv[i].size    = b->len;
    return HET_OK;
}

static enum het_status set_scalar(het_gguf_writer *w, const char *key, enum het_gguf_type type, const void *v)
{
    if (!w || !key) return HET_ERR_INVALID;
    struct bytes b = { 0 };
    bytes_put(&b, v, het_gguf_internal_type_size(type));
    return set_payload(w, key, type, &b);
}

enum het_status het_gguf_writer_set_u32(het_gguf_writer *w, const char *key, uint32_t v)
{
    return set_scalar(w, key, HET_GGUF_TYPE_UINT32, &v);
}

enum het_status het_gguf_writer_set_i32(het_gguf_writer *w, const char *key, int32_t v)
{
    return set_scalar(w, key, HET_GGUF_TYPE_INT32, &v);
}

enum het_status het_gguf_writer_set_u64(het_gguf_writer *w, const char *key, uint64_t v)
{
    return set_scalar(w, key, HET_GGUF_TYPE_UINT64, &v);
}

enum het_status het_gguf_writer_set_f32(het_gguf_writer *w, const char *key, float v)
{
    return set_scalar(w, key, HET_GGUF_TYPE_FLOAT32, &v);
}

enum het_status het_gguf_writer_set_bool(het_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, HET_GGUF_TYPE_BOOL, &b);
}

static enum het_status set_str_n(het_gguf_writer *w, const char *key, const char *v, size_t n)
{
    if (!w || !key || !v) return HET_ERR_INVALID;
    struct bytes b = { 0 };
    bytes_str(&b, v, n);
    return set_payload(w, key, HET_GGUF_TYPE_STRING, &b);
}

enum het_status het_gguf_writer_set_str(het_gguf_writer *w, const char *key, const char *v)
{
    return set_str_n(w, key, v, v ? strlen(v) : 0);
}

enum het_status het_gguf_writer_set_arr(het_gguf_writer *w, const char *key, enum het_gguf_type elem,
                                        const void *data, int64_t n)
{
    size_t es = het_gguf_internal_type_size(elem);
    if (!w || !key || es == 0 || n < 0 || (n > 0 && !data) || (uint64_t)n > SIZE_MAX / es)
        return HET_ERR_INVALID;
    struct bytes b = { 0 };
    bytes_u32(&b, elem);
    bytes_u64(&b, (uint64_t)n);
    bytes_put(&b, data, (size_t)n * es);
    return set_payload(w, key, HET_GGUF_TYPE_ARRAY, &b);
}

enum het_status het_gguf_writer_set_arr_str(het_gguf_writer *w, const char *key, const char *const *strs,
                                            int64_t n)
{
    if (!w || !key || n < 0 || (n > 0 && !strs)) return HET_ERR_INVALID;
    for (int64_t i = 0; i < n; i++)
        if (!strs[i]) return HET_ERR_INVALID;
    struct bytes b = { 0 };
    bytes_u32(&b, HET_GGUF_TYPE_STRING);
    bytes_u64(&b, (uint64_t)n);
    for (int64_t i = 0; i < n; i++) bytes_str(&b, strs[i], strlen(strs[i]));
    return set_payload(w, key, HET_GGUF_TYPE_ARRAY, &b);
}

static enum het_status copy_array(het_gguf_writer *w, const char *key, const het_gguf *src, int64_t i)
{
    enum het_gguf_type et = het_gguf_kv_arr_type(src, i);
    int64_t n = het_gguf_kv_arr_n(src, i);
    if (et != HET_GGUF_TYPE_STRING) return het_gguf_writer_set_arr(w, key, et, het_gguf_internal_arr(src, i), n);
    struct bytes b = { 0 };
    bytes_u32(&b, HET_GGUF_TYPE_STRING);
    bytes_u64(&b, (uint64_t)n);
    for (int64_t k = 0; k < n; k++) {
        size_t len = 0;
        const char *s = het_gguf_internal_arr_str(src, i, k, &len);
        bytes_str(&b, s, len);
    }
    return set_payload(w, key, HET_GGUF_TYPE_ARRAY, &b);
}

enum het_status het_gguf_writer_copy_kv(het_gguf_writer *w, const het_gguf *src, int64_t i)
{
    if (!w || !src || i < 0 || i >= het_gguf_n_kv(src)) return HET_ERR_INVALID;
    const char *key = het_gguf_kv_key(src, i);
    enum het_gguf_type t = het_gguf_kv_type(src, i);
    if (t == HET_GGUF_TYPE_ARRAY) return copy_array(w, key, src, i);
    if (t == HET_GGUF_TYPE_STRING) {
        size_t len = 0;
        const char *s = het_gguf_internal_str(src, i, &len);
        return set_str_n(w, key, s, len);
    }
    /* scalars: re-encode the decoded value at the stored width */
    const union het_gguf_scalar *v = het_gguf_internal_scalar(src, i);
    union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f32; double f64; } e;
    switch (het_gguf_internal_type_size(t)) {
    case 1: e.u8 = (uint8_t)v->u; break;
    case 2: e.u16 = (uint16_t)v->u; break;
    case 4: if (t == HET_GGUF_TYPE_FLOAT32) e.f32 = (float)v->f; else e.u32 = (uint32_t)v->u; break;
    case 8: if (t == HET_GGUF_TYPE_FLOAT64) e.f64 = v->f; else e.u64 = v->u; break;
    default: return HET_ERR_INVALID;
    }
    return set_scalar(w, key, t, &e);
}

/* ---- tensors --------------------------------------------------------------- */

enum het_status het_gguf_writer_add_tensor(het_gguf_writer *w, const char *name, enum het_type type,
                                           int n_dims, const int64_t *ne, const void *data)
{
    if (!w || !name || !ne || n_dims < 1 || n_dims > 4 || strlen(name) >= GGUF_MAX_NAME) return HET_ERR_INVALID;
    if (!het_type_is_known((uint32_t)type) || find_tensor(w, name) >= 0) return HET_ERR_INVALID;
    const struct het_type_traits *tr = het_type_get_traits(type);
    if (!tr || tr->blck_size <= 0 || tr->type_size == 0) return HET_ERR_INVALID;
    struct wtensor t = { .type = type, .n_dims = n_dims, .ne = { 1, 1, 1, 1 } };
    uint64_t nel = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || (uint64_t)ne[d] > INT64_MAX / nel) return HET_ERR_INVALID;
        t.ne[d] = ne[d];
        nel *= (uint64_t)ne[d];
    }
    if (t.ne[0] % tr->blck_size != 0) return HET_ERR_INVALID;
    uint64_t row = (uint64_t)(t.ne[0] / tr->blck_size) * tr->type_size, rows = nel / (uint64_t)t.ne[0];
    if (row > SIZE_MAX / rows) return HET_ERR_INVALID;
    t.size = (size_t)(row * rows);
    if (!grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) return HET_ERR_NOMEM;
    if (!(t.name = strdup(name))) return HET_ERR_NOMEM;
    if (data) {
        if (!(t.data = malloc(t.size))) {
            free(t.name);
            return HET_ERR_NOMEM;
        }
        memcpy(t.data, data, t.size);
    }
    w->t[w->n_t++] = t;
    return HET_OK;
}

enum het_status het_gguf_writer_set_tensor_data(het_gguf_writer *w, const char *name, const void *data)
{
    if (!w || !name || !data) return HET_ERR_INVALID;
    int64_t i = find_tensor(w, name);
    if (i < 0) return HET_ERR_INVALID;
    void *copy = malloc(w->t[i].size);
    if (!copy) return HET_ERR_NOMEM;
    memcpy(copy, data, w->t[i].size);
    free(w->t[i].data);
    w->t[i].data = copy;
    return HET_OK;
}

/* ---- writing --------------------------------------------------------------- */

struct out {
    FILE       *f;
    const char *path;
    uint64_t    pos;
    bool        ok;
    int         errnum;
};

static void out_put(struct out *o, const void *p, size_t n)
{
    if (!o->ok || n == 0) return;
    if (fwrite(p, 1, n, o->f) != n) {
        o->ok = false;
        o->errnum = errno;
    }
    o->pos += n;
}

static void out_u32(struct out *o, uint32_t v) { out_put(o, &v, 4); }
static void out_u64(struct out *o, uint64_t v) { out_put(o, &v, 8); }

static void out_pad(struct out *o, size_t align)
{
    static const unsigned char zeros[256];
    size_t pad = (size_t)((align - o->pos % align) % align);
    while (pad) {
        size_t n = pad < sizeof zeros ? pad : sizeof zeros;
        out_put(o, zeros, n);
        pad -= n;
    }
}

static enum het_status writer_alignment(const het_gguf_writer *w, size_t *align, het_error *err, const char *path)
{
    *align = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = find_kv(w, "general.alignment");
    if (i < 0) return HET_OK;
    uint32_t a = 0;
    if (w->kv[i].type == HET_GGUF_TYPE_UINT32) memcpy(&a, w->kv[i].payload, 4);
    if (a == 0 || (a & (a - 1)) != 0)
        return het_error_set(err, HET_ERR_INVALID, "gguf: %s: general.alignment must be a u32 power of two", path);
    *align = a;
    return HET_OK;
}

static void write_meta(struct out *o, const het_gguf_writer *w, size_t align)
{
    out_put(o, "GGUF", 4);
    out_u32(o, GGUF_VERSION);
    out_u64(o, (uint64_t)w->n_t);
    out_u64(o, (uint64_t)w->n_kv);
    for (int64_t i = 0; i < w->n_kv; i++) {
        out_u64(o, strlen(w->kv[i].key));
        out_put(o, w->kv[i].key, strlen(w->kv[i].key));
        out_u32(o, w->kv[i].type);
        out_put(o, w->kv[i].payload, w->kv[i].size);
    }
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        struct wtensor *t = &w->t[i];
        out_u64(o, strlen(t->name));
        out_put(o, t->name, strlen(t->name));
        out_u32(o, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) out_u64(o, (uint64_t)t->ne[d]);
        out_u32(o, (uint32_t)t->type);
        t->offset = off;
        out_u64(o, off);
        off += (t->size + align - 1) / align * align;
    }
    if (w->n_t) out_pad(o, align);
}

static enum het_status write_data(struct out *o, const het_gguf_writer *w, size_t align,
                                  het_gguf_tensor_fill_fn fill, void *user, het_error *err)
{
    for (int64_t i = 0; i < w->n_t && o->ok; i++) {
        const struct wtensor *t = &w->t[i];
        if (t->data) {
            out_put(o, t->data, t->size);
        } else {
            if (!fill)
                return het_error_set(err, HET_ERR_INVALID, "gguf: %s: tensor '%s' has no data", o->path, t->name);
            void *buf = malloc(t->size);
            if (!buf)
                return het_error_set(err, HET_ERR_NOMEM, "gguf: %s: out of memory for tensor '%s' (%zu bytes)",
                                     o->path, t->name, t->size);
            enum het_status st = fill(user, i, t->name, buf, t->size, err);
            if (st == HET_OK) out_put(o, buf, t->size);
            free(buf);
            if (st != HET_OK) return st;
        }
        out_pad(o, align);
    }
    return HET_OK;
}

enum het_status het_gguf_writer_write_stream(het_gguf_writer *w, const char *path, het_gguf_tensor_fill_fn fill,
                                             void *user, het_error *err)
{
    if (!w || !path) return het_error_set(err, HET_ERR_INVALID, "gguf: writer: NULL argument");
    size_t align;
    enum het_status st = writer_alignment(w, &align, err, path);
    if (st != HET_OK) return st;
    for (int64_t i = 0; i < w->n_t; i++)
        if (!w->t[i].data && !fill)
            return het_error_set(err, HET_ERR_INVALID, "gguf: %s: tensor '%s' has no data", path, w->t[i].name);
    struct out o = { .f = fopen(path, "wb"), .path = path, .ok = true };
    if (!o.f) return het_error_set(err, HET_ERR_IO, "gguf: %s: cannot create: %s", path, strerror(errno));
    setvbuf(o.f, NULL, _IOFBF, 1 << 20);
    write_meta(&o, w, align);
    st = write_data(&o, w, align, fill, user, err);
    if (fclose(o.f) != 0 && o.ok) {
        o.ok = false;
        o.errnum = errno;
    }
    if (st == HET_OK && !o.ok)
        st = het_error_set(err, HET_ERR_IO, "gguf: %s: write failed at offset %" PRIu64 ": %s", path, o.pos,
                           strerror(o.errnum));
    if (st != HET_OK) remove(path);
    return st;
}

enum het_status het_gguf_writer_write(het_gguf_writer *w, const char *path, het_error *err)
{
    return het_gguf_writer_write_stream(w, path, NULL, NULL, err);
}

int64_t het_gguf_writer_n_tensors(const het_gguf_writer *w) { return w ? w->n_t : 0; }

const char *het_gguf_writer_tensor_name(const het_gguf_writer *w, int64_t i)
{
    return w && i >= 0 && i < w->n_t ? w->t[i].name : NULL;
}
