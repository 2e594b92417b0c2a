/*
 * gguf.c — the GGUF (v2/v3) reader.
 *
 * A GGUF file is: magic "GGUF", version, tensor count, key/value count, the
 * key/values, the tensor infos, padding to the alignment, then the tensor
 * data. Everything is little-endian and length-prefixed, so a hostile file
 * can claim anything; this reader checks every count, length, type id, shape
 * and offset against the bytes that are really there *before* it allocates
 * or dereferences, and reports the first problem as one line naming the
 * field and its file offset. Keys, strings and numeric arrays are copied
 * into an arena owned by the het_gguf so accessors never touch the mapping
 * for metadata; tensor data stays in the (read-only) mapping.
 *
 * The writer lives in gguf_write.c.
 */
#include "het/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf_internal.h"

/* Numeric arrays and tensor data are copied as is: the host must be little-endian. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "GGUF I/O assumes a little-endian host");

#define GGUF_MAGIC             0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS          4
#define GGUF_ARENA_BLOCK       (256u * 1024u)

/* smallest possible encodings, used to bound counts before allocating */
#define GGUF_MIN_KV_BYTES     13u /* key length 8 + type 4 + 1-byte value */
#define GGUF_MIN_TENSOR_BYTES 32u /* name length 8 + n_dims 4 + ne 8 + type 4 + offset 8 */

/* ---- arena: bump allocator in linked blocks ----------------------------- */

struct arena_block {
    struct arena_block *next;
    size_t              used, cap;
    _Alignas(16) unsigned char data[];
};

struct gguf_kv {
    const char        *key;      /* NUL-terminated copy                      */
    size_t             key_len;
    enum het_gguf_type type;
    enum het_gguf_type arr_type; /* arrays only                              */
    int64_t            arr_n;    /* arrays only                              */
    union het_gguf_scalar v;     /* numeric and bool scalars                 */
    const char        *str;      /* STRING: NUL-terminated copy              */
    size_t             str_len;
    const void        *arr;      /* numeric array copy                       */
    const char *const *strs;     /* string array: element pointers           */
    const size_t      *lens;     /* string array: element byte lengths       */
    uint64_t           offset;   /* file offset of the key record            */
};

struct het_gguf {
    const unsigned char *base;
    size_t               size;
    bool                 mapped;      /* base is our mmap                    */
    uint32_t             version;
    size_t               alignment;
    uint64_t             data_offset;
    int64_t              n_kv, n_tensors;
    struct gguf_kv      *kv;
    struct het_gguf_tensor_info *tensors;
    int64_t             *kv_hash;     /* open addressing, index+1, 0 = empty  */
    size_t               kv_hash_cap;
    int64_t             *t_hash;
    size_t               t_hash_cap;
    struct arena_block  *arena;
};

static void *arena_alloc(het_gguf *g, size_t n, size_t align)
{
    struct arena_block *b = g->arena;
    if (b) {
        size_t at = (b->used + align - 1) & ~(align - 1);
        if (at <= b->cap && b->cap - at >= n) {
            b->used = at + n;
            return b->data + at;
        }
    }
    size_t cap = n > GGUF_ARENA_BLOCK ? n : GGUF_ARENA_BLOCK;
    if (cap > SIZE_MAX - sizeof *b) return NULL;
    b = malloc(sizeof *b + cap);
    if (!b) return NULL;
    b->cap  = cap;
    b->used = n;
    b->next = g->arena;
    g->arena = b;
    return b->data;
}

static void arena_free(struct arena_block *b)
{
    while (b) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
}

/* ---- byte cursor with checked reads ------------------------------------- */

struct reader {
    const unsigned char *p;
    size_t               size, pos;
    const char          *path;
    het_error           *err;
    het_gguf            *g;
    char                 what[192];  /* the field being read, for messages  */
};

static bool fail_at(struct reader *r, uint64_t off, enum het_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool fail_at(struct reader *r, uint64_t off, enum het_status st, const char *fmt, ...)
{
    char problem[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    het_error_set(r->err, st, "gguf: %s: %s at offset %" PRIu64 ": %s", r->path, r->what, off, problem);
    return false;
}

static void set_what(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_what(struct reader *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->what, sizeof r->what, fmt, ap);
    va_end(ap);
}

static bool need(struct reader *r, uint64_t n)
{
    if (r->size - r->pos >= n) return true;
    return fail_at(r, r->pos, HET_ERR_FORMAT, "truncated: needs %" PRIu64 " bytes, %zu left", n,
                   r->size - r->pos);
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

static bool read_u32(struct reader *r, uint32_t *v)
{
    if (!need(r, 4)) return false;
    *v = le32(r->p + r->pos);
    r->pos += 4;
    return true;
}

static bool read_u64(struct reader *r, uint64_t *v)
{
    if (!need(r, 8)) return false;
    *v = le64(r->p + r->pos);
    r->pos += 8;
    return true;
}

/* A length-prefixed string; *s points into the buffer (not terminated). */
static bool read_str(struct reader *r, const unsigned char **s, uint64_t *len)
{
    uint64_t at = r->pos;
    if (!read_u64(r, len)) return false;
    if (*len > r->size - r->pos)
        return fail_at(r, at, HET_ERR_FORMAT, "string length %" PRIu64 " exceeds the %zu bytes left",
                       *len, r->size - r->pos);
    *s = r->p + r->pos;
    r->pos += (size_t)*len;
    return true;
}

static char *copy_str(struct reader *r, const unsigned char *s, uint64_t len)
{
    char *c = arena_alloc(r->g, (size_t)len + 1, 1);
    if (!c) {
        fail_at(r, r->pos, HET_ERR_NOMEM, "out of memory copying %" PRIu64 " bytes", len);
        return NULL;
    }
    memcpy(c, s, (size_t)len);
    c[len] = '\0';
    return c;
}

/* ---- type helpers --------------------------------------------------------- */

static size_t gguf_type_size(uint32_t t)
{
    switch (t) {
    case HET_GGUF_TYPE_UINT8: case HET_GGUF_TYPE_INT8: case HET_GGUF_TYPE_BOOL:     return 1;
    case HET_GGUF_TYPE_UINT16: case HET_GGUF_TYPE_INT16:                           return 2;
    case HET_GGUF_TYPE_UINT32: case HET_GGUF_TYPE_INT32: case HET_GGUF_TYPE_FLOAT32: return 4;
    case HET_GGUF_TYPE_UINT64: case HET_GGUF_TYPE_INT64: case HET_GGUF_TYPE_FLOAT64: return 8;
    default: return 0;  /* STRING, ARRAY and unknown ids */
    }
}

size_t het_gguf_internal_type_size(enum het_gguf_type t) { return gguf_type_size(t); }

const char *het_gguf_type_name(enum het_gguf_type t)
{
    static const char *const names[HET_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
    };
    return (unsigned)t < HET_GGUF_TYPE_COUNT ? names[t] : "unknown";
}

/* Decode a scalar of type t at p into kv->v (numeric and bool only). */
static void decode_scalar(struct gguf_kv *kv, uint32_t t, const unsigned char *p)
{
    switch (t) {
    case HET_GGUF_TYPE_UINT8:  kv->v.u = p[0]; break;
    case HET_GGUF_TYPE_BOOL:   kv->v.u = p[0] != 0; break;
    case HET_GGUF_TYPE_INT8:   kv->v.i = (int8_t)p[0]; break;
    case HET_GGUF_TYPE_UINT16: kv->v.u = (uint16_t)(p[0] | p[1] << 8); break;
    case HET_GGUF_TYPE_INT16:  kv->v.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case HET_GGUF_TYPE_UINT32: kv->v.u = le32(p); break;
    case HET_GGUF_TYPE_INT32:  kv->v.i = (int32_t)le32(p); break;
    case HET_GGUF_TYPE_UINT64: kv->v.u = le64(p); break;
    case HET_GGUF_TYPE_INT64:  kv->v.i = (int64_t)le64(p); break;
    case HET_GGUF_TYPE_FLOAT32: {
        uint32_t b = le32(p);
        float f;
        memcpy(&f, &b, 4);
        kv->v.f = f;
        break;
    }
    case HET_GGUF_TYPE_FLOAT64: {
        uint64_t b = le64(p);
        memcpy(&kv->v.f, &b, 8);
        break;
    }
    default: break;
    }
}

/* ---- hash tables (key -> index) ------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static size_t hash_cap_for(int64_t n)
{
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap *= 2;
    return cap;
}

/* Returns the slot for (s, n): either the matching entry or an empty one. */
static size_t hash_slot(const int64_t *tab, size_t cap, const char *s, size_t n,
                        const char *(*name_of)(const het_gguf *, int64_t, size_t *), const het_gguf *g)
{
    size_t i = (size_t)hash_bytes(s, n) & (cap - 1);
    for (;;) {
        if (tab[i] == 0) return i;
        size_t len;
        const char *name = name_of(g, tab[i] - 1, &len);
        if (len == n && memcmp(name, s, n) == 0) return i;
        i = (i + 1) & (cap - 1);
    }
}

static const char *kv_name(const het_gguf *g, int64_t i, size_t *len)
{
    *len = g->kv[i].key_len;
    return g->kv[i].key;
}

static const char *tensor_name(const het_gguf *g, int64_t i, size_t *len)
{
    *len = strlen(g->tensors[i].name);
    return g->tensors[i].name;
}

/* ---- key/value parsing ---------------------------------------------------- */

static bool read_numeric_array(struct reader *r, struct gguf_kv *kv, uint64_t n, uint64_t at)
{
    size_t es = gguf_type_size(kv->arr_type);
    if (n > (r->size - r->pos) / es)
        return fail_at(r, at, HET_ERR_FORMAT, "array of %" PRIu64 " %s exceeds the %zu bytes left", n,
                       het_gguf_type_name(kv->arr_type), r->size - r->pos);
    size_t bytes = (size_t)n * es;
    void *a = arena_alloc(r->g, bytes ? bytes : 1, 16);
    if (!a) return fail_at(r, at, HET_ERR_NOMEM, "out of memory for a %zu-byte array", bytes);
    memcpy(a, r->p + r->pos, bytes);  /* host is little-endian (x86-64, aarch64) */
    r->pos += bytes;
    kv->arr = a;
    return true;
}

static bool read_string_array(struct reader *r, struct gguf_kv *kv, uint64_t n, uint64_t at)
{
    if (n > (r->size - r->pos) / 8)
        return fail_at(r, at, HET_ERR_FORMAT, "array of %" PRIu64 " strings exceeds the %zu bytes left",
                       n, r->size - r->pos);
    const char **strs = arena_alloc(r->g, (size_t)n * sizeof *strs + 1, _Alignof(const char *));
    size_t *lens      = arena_alloc(r->g, (size_t)n * sizeof *lens + 1, _Alignof(size_t));
    if (!strs || !lens)
        return fail_at(r, at, HET_ERR_NOMEM, "out of memory for %" PRIu64 " strings", n);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t el_at = r->pos, len = 0;
        bool ok = r->size - r->pos >= 8 && (len = le64(r->p + r->pos)) <= r->size - r->pos - 8;
        if (!ok) {
            size_t n_what = strlen(r->what);
            snprintf(r->what + n_what, sizeof r->what - n_what, " element %" PRIu64, i);
            return fail_at(r, el_at, HET_ERR_FORMAT, "string does not fit in the %zu bytes left",
                           r->size - r->pos);
        }
        r->pos += 8;
        if (!(strs[i] = copy_str(r, r->p + r->pos, len))) return false;
        r->pos += (size_t)len;
        lens[i] = (size_t)len;
    }
    kv->strs = strs;
    kv->lens = lens;
    return true;
}

static bool read_array(struct reader *r, struct gguf_kv *kv)
{
    uint64_t at = r->pos;
    uint32_t et;
    uint64_t n;
    if (!read_u32(r, &et)) return false;
    if (et == HET_GGUF_TYPE_ARRAY)
        return fail_at(r, at, HET_ERR_FORMAT, "nested arrays are not supported");
    if (et >= HET_GGUF_TYPE_COUNT)
        return fail_at(r, at, HET_ERR_FORMAT, "unknown array element type %" PRIu32, et);
    at = r->pos;
    if (!read_u64(r, &n)) return false;
    if (n > INT64_MAX) return fail_at(r, at, HET_ERR_FORMAT, "array length %" PRIu64 " too large", n);
    kv->arr_type = (enum het_gguf_type)et;
    kv->arr_n    = (int64_t)n;
    if (et == HET_GGUF_TYPE_STRING) return read_string_array(r, kv, n, at);
    return read_numeric_array(r, kv, n, at);
}

static bool read_value(struct reader *r, struct gguf_kv *kv, uint32_t type)
{
    if (type == HET_GGUF_TYPE_STRING) {
        const unsigned char *s;
        uint64_t len;
        if (!read_str(r, &s, &len)) return false;
        kv->str_len = (size_t)len;
        return (kv->str = copy_str(r, s, len)) != NULL;
    }
    if (type == HET_GGUF_TYPE_ARRAY) return read_array(r, kv);
    size_t es = gguf_type_size(type);
    if (!need(r, es)) return false;
    decode_scalar(kv, type, r->p + r->pos);
    r->pos += es;
    return true;
}

static bool read_kv(struct reader *r, int64_t idx)
{
    het_gguf *g = r->g;
    struct gguf_kv *kv = &g->kv[idx];
    kv->offset = r->pos;
    set_what(r, "key #%" PRId64, idx);
    const unsigned char *s;
    uint64_t len;
    if (!read_str(r, &s, &len)) return false;
    if (!(kv->key = copy_str(r, s, len))) return false;
    kv->key_len = (size_t)len;
    set_what(r, "key #%" PRId64 " '%.100s'", idx, kv->key);

    size_t slot = hash_slot(g->kv_hash, g->kv_hash_cap, kv->key, kv->key_len, kv_name, g);
    if (g->kv_hash[slot])
        return fail_at(r, kv->offset, HET_ERR_FORMAT, "duplicate key (first at offset %" PRIu64 ")",
                       g->kv[g->kv_hash[slot] - 1].offset);

    uint64_t type_at = r->pos;
    uint32_t type;
    if (!read_u32(r, &type)) return false;
    if (type >= HET_GGUF_TYPE_COUNT)
        return fail_at(r, type_at, HET_ERR_FORMAT, "unknown value type %" PRIu32, type);
    kv->type = (enum het_gguf_type)type;
    if (!read_value(r, kv, type)) return false;
    g->kv_hash[slot] = idx + 1;
    return true;
}

static bool read_header(struct reader *r, uint64_t *n_tensors, uint64_t *n_kv)
{
    set_what(r, "magic");
    if (!need(r, 4)) return false;
    if (le32(r->p) != GGUF_MAGIC)
        return fail_at(r, 0, HET_ERR_FORMAT, "not a GGUF file (magic %02x %02x %02x %02x)",
                       r->p[0], r->p[1], r->p[2], r->p[3]);
    r->pos = 4;
    set_what(r, "version");
    uint32_t v;
    if (!read_u32(r, &v)) return false;
    if (v == 1)
        return fail_at(r, 4, HET_ERR_UNSUPPORTED,
                       "GGUF v1 is not supported (32-bit counts); re-convert the model to v3");
    if ((v & 0xffff) == 0 && v != 0)
        return fail_at(r, 4, HET_ERR_UNSUPPORTED, "big-endian GGUF (version 0x%08" PRIx32 ") is not supported", v);
    if (v != 2 && v != 3)
        return fail_at(r, 4, HET_ERR_UNSUPPORTED, "unsupported GGUF version %" PRIu32 " (only 2 and 3)", v);
    r->g->version = v;

    set_what(r, "tensor count");
    if (!read_u64(r, n_tensors)) return false;
    set_what(r, "key/value count");
    if (!read_u64(r, n_kv)) return false;
    /* bound both counts by the bytes left before allocating anything */
    uint64_t left = r->size - r->pos;
    if (*n_kv > left / GGUF_MIN_KV_BYTES)
        return fail_at(r, 16, HET_ERR_FORMAT, "%" PRIu64 " key/values cannot fit in %" PRIu64 " bytes", *n_kv, left);
    left -= *n_kv * GGUF_MIN_KV_BYTES;
    set_what(r, "tensor count");
    if (*n_tensors > left / GGUF_MIN_TENSOR_BYTES)
        return fail_at(r, 8, HET_ERR_FORMAT, "%" PRIu64 " tensors cannot fit in the %" PRIu64 " bytes left",
                       *n_tensors, left);
    return true;
}

static bool read_kvs(struct reader *r, uint64_t n_kv)
{
    het_gguf *g = r->g;
    g->kv_hash_cap = hash_cap_for((int64_t)n_kv);
    g->kv      = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->kv_hash = calloc(g->kv_hash_cap, sizeof *g->kv_hash);
    if (!g->kv || !g->kv_hash) return fail_at(r, r->pos, HET_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!read_kv(r, (int64_t)i)) return false;
        g->n_kv = (int64_t)i + 1;
    }
    return true;
}

/* general.alignment, when present, must be a u32 power of two. */
static bool read_alignment(struct reader *r)
{
    het_gguf *g = r->g;
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = het_gguf_find_key(g, "general.alignment");
    if (i < 0) return true;
    const struct gguf_kv *kv = &g->kv[i];
    set_what(r, "key #%" PRId64 " 'general.alignment'", i);
    if (kv->type != HET_GGUF_TYPE_UINT32)
        return fail_at(r, kv->offset, HET_ERR_FORMAT, "type is %s, must be u32", het_gguf_type_name(kv->type));
    if (kv->v.u == 0 || (kv->v.u & (kv->v.u - 1)) != 0)
        return fail_at(r, kv->offset, HET_ERR_FORMAT, "alignment %" PRIu64 " is not a power of two", kv->v.u);
    g->alignment = (size_t)kv->v.u;
    return true;
}

/* ---- tensor infos --------------------------------------------------------- */

static bool read_shape(struct reader *r, struct het_gguf_tensor_info *t)
{
    uint64_t at = r->pos;
    uint32_t n_dims;
    if (!read_u32(r, &n_dims)) return false;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return fail_at(r, at, HET_ERR_FORMAT, "n_dims %" PRIu32 " is not in 1..%d", n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t prod = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = 1;
        if (d >= (int)n_dims) continue;
        uint64_t ne;
        at = r->pos;
        if (!read_u64(r, &ne)) return false;
        if (ne == 0 || ne > INT64_MAX)
            return fail_at(r, at, HET_ERR_FORMAT, "ne[%d] = %" PRIu64 " is out of range", d, ne);
        if (prod > INT64_MAX / ne)
            return fail_at(r, at, HET_ERR_FORMAT, "ne[%d] = %" PRIu64 ": element count overflows", d, ne);
        prod *= ne;
        t->ne[d] = (int64_t)ne;
    }
    return true;
}

/* Type id and byte size; rows must be whole blocks. */
static bool read_type_size(struct reader *r, struct het_gguf_tensor_info *t)
{
    uint64_t at = r->pos;
    uint32_t type;
    if (!read_u32(r, &type)) return false;
    const struct het_type_traits *tr = het_type_is_known(type) ? het_type_get_traits((enum het_type)type) : NULL;
    if (!tr || tr->blck_size <= 0 || tr->type_size == 0)
        return fail_at(r, at, HET_ERR_FORMAT, "unknown tensor type %" PRIu32, type);
    t->type = (enum het_type)type;
    if (t->ne[0] % tr->blck_size != 0)
        return fail_at(r, at, HET_ERR_FORMAT, "row length ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                       t->ne[0], tr->name, tr->blck_size);
    uint64_t row = (uint64_t)(t->ne[0] / tr->blck_size);
    uint64_t rows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3]; /* fits: product checked */
    if (row > UINT64_MAX / tr->type_size || row * tr->type_size > SIZE_MAX / rows)
        return fail_at(r, at, HET_ERR_FORMAT, "tensor byte size overflows");
    t->size = (size_t)(row * tr->type_size * rows);
    return true;
}

static bool read_tensor_info(struct reader *r, int64_t idx)
{
    het_gguf *g = r->g;
    struct het_gguf_tensor_info *t = &g->tensors[idx];
    t->info_offset = r->pos;
    set_what(r, "tensor #%" PRId64, idx);
    const unsigned char *s;
    uint64_t len;
    if (!read_str(r, &s, &len)) return false;
    if (memchr(s, 0, (size_t)len))
        return fail_at(r, t->info_offset, HET_ERR_FORMAT, "tensor name contains a NUL byte");
    if (!(t->name = copy_str(r, s, len))) return false;
    set_what(r, "tensor #%" PRId64 " '%.100s'", idx, t->name);
    size_t slot = hash_slot(g->t_hash, g->t_hash_cap, t->name, (size_t)len, tensor_name, g);
    if (g->t_hash[slot])
        return fail_at(r, t->info_offset, HET_ERR_FORMAT, "duplicate tensor name (first at offset %" PRIu64 ")",
                       g->tensors[g->t_hash[slot] - 1].info_offset);
    if (!read_shape(r, t) || !read_type_size(r, t)) return false;
    uint64_t at = r->pos;
    if (!read_u64(r, &t->offset)) return false;
    if (t->offset % g->alignment != 0)
        return fail_at(r, at, HET_ERR_FORMAT, "data offset %" PRIu64 " is not a multiple of the alignment %zu",
                       t->offset, g->alignment);
    g->t_hash[slot] = idx + 1;
    return true;
}

struct offset_index {
    uint64_t offset;
    int64_t  index;
};

static int cmp_offset(const void *a, const void *b)
{
    uint64_t x = ((const struct offset_index *)a)->offset, y = ((const struct offset_index *)b)->offset;
    return x < y ? -1 : x > y;
}

/* Data section: every tensor inside the file, none overlapping. */
static bool check_tensor_data(struct reader *r)
{
    het_gguf *g = r->g;
    if (g->n_tensors == 0) return true;
    uint64_t avail = g->data_offset <= r->size ? r->size - g->data_offset : 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct het_gguf_tensor_info *t = &g->tensors[i];
        if (t->offset > avail || t->size > avail - t->offset) {
            set_what(r, "tensor #%" PRId64 " '%.100s'", i, t->name);
            return fail_at(r, t->info_offset, HET_ERR_FORMAT,
                           "data [%" PRIu64 ", +%zu) of the data section at %" PRIu64 " runs past the end of the file (%zu bytes)",
                           t->offset, t->size, g->data_offset, r->size);
        }
        t->data = r->p + g->data_offset + t->offset;
    }
    struct offset_index *order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return fail_at(r, r->pos, HET_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = (struct offset_index){ g->tensors[i].offset, i };
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_offset);
    bool ok = true;
    for (int64_t k = 1; k < g->n_tensors && ok; k++) {
        const struct het_gguf_tensor_info *a = &g->tensors[order[k - 1].index], *b = &g->tensors[order[k].index];
        if (a->offset + a->size > b->offset) {
            set_what(r, "tensor #%" PRId64 " '%.100s'", order[k].index, b->name);
            ok = fail_at(r, b->info_offset, HET_ERR_FORMAT, "data at %" PRIu64 " overlaps tensor '%.100s' [%" PRIu64 ", +%zu)",
                         b->offset, a->name, a->offset, a->size);
        }
    }
    free(order);
    return ok;
}

static bool read_tensors(struct reader *r, uint64_t n)
{
    het_gguf *g = r->g;
    g->t_hash_cap = hash_cap_for((int64_t)n);
    g->tensors = calloc(n ? n : 1, sizeof *g->tensors);
    g->t_hash  = calloc(g->t_hash_cap, sizeof *g->t_hash);
    if (!g->tensors || !g->t_hash) return fail_at(r, r->pos, HET_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        if (!read_tensor_info(r, (int64_t)i)) return false;
        g->n_tensors = (int64_t)i + 1;
    }
    /* the data section starts at the next multiple of the alignment; in
     * vocab-only files (no tensors) that may lie past EOF, which is fine */
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad;
    set_what(r, "data section");
    return check_tensor_data(r);
}

static het_gguf *parse(const void *data, size_t size, const char *path, bool mapped, het_error *err)
{
    het_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        het_error_set(err, HET_ERR_NOMEM, "gguf: %s: out of memory", path);
        if (mapped) munmap((void *)data, size);
        return NULL;
    }
    g->base = data;
    g->size = size;
    g->mapped = mapped;
    struct reader r = { .p = data, .size = size, .path = path, .err = err, .g = g };
    uint64_t n_tensors, n_kv;
    bool ok = read_header(&r, &n_tensors, &n_kv) && read_kvs(&r, n_kv) && read_alignment(&r) &&
              read_tensors(&r, n_tensors);
    if (!ok) {
        het_gguf_close(g);
        return NULL;
    }
    return g;
}

/* ---- open / close --------------------------------------------------------- */

het_gguf *het_gguf_open_memory(const void *data, size_t size, het_error *err)
{
    if (!data && size) {
        het_error_set(err, HET_ERR_INVALID, "gguf: <memory>: NULL buffer");
        return NULL;
    }
    static const unsigned char empty[1];
    return parse(data ? data : empty, size, "<memory>", false, err);
}

het_gguf *het_gguf_open(const char *path, het_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        het_error_set(err, HET_ERR_IO, "gguf: %s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        het_error_set(err, HET_ERR_IO, "gguf: %s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        close(fd);
        het_error_set(err, HET_ERR_FORMAT, "gguf: %s: magic at offset 0: empty file", path);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        het_error_set(err, HET_ERR_IO, "gguf: %s: mmap of %zu bytes failed: %s", path, size, strerror(e));
        return NULL;
    }
    return parse(p, size, path, true, err);
}

void het_gguf_close(het_gguf *g)
{
    if (!g) return;
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g->kv);
    free(g->kv_hash);
    free(g->tensors);
    free(g->t_hash);
    arena_free(g->arena);
    free(g);
}

/* ---- accessors ------------------------------------------------------------ */

uint32_t    het_gguf_version(const het_gguf *g) { return g->version; }
size_t      het_gguf_alignment(const het_gguf *g) { return g->alignment; }
uint64_t    het_gguf_data_offset(const het_gguf *g) { return g->data_offset; }
int64_t     het_gguf_n_kv(const het_gguf *g) { return g->n_kv; }
int64_t     het_gguf_n_tensors(const het_gguf *g) { return g->n_tensors; }

bool het_gguf_internal_is_mapped(const het_gguf *g) { return g->mapped; }

const void *het_gguf_file_data(const het_gguf *g, size_t *size)
{
    if (size) *size = g->size;
    return g->base;
}

static const struct gguf_kv *kv_at(const het_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

const char *het_gguf_kv_key(const het_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}

enum het_gguf_type het_gguf_kv_type(const het_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->type : HET_GGUF_TYPE_COUNT;
}

enum het_gguf_type het_gguf_kv_arr_type(const het_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr_type : HET_GGUF_TYPE_COUNT;
}

int64_t het_gguf_kv_arr_n(const het_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr_n : -1;
}

int64_t het_gguf_find_key(const het_gguf *g, const char *key)
{
    if (!g || !key || !g->kv_hash) return -1;
    size_t slot = hash_slot(g->kv_hash, g->kv_hash_cap, key, strlen(key), kv_name, g);
    return g->kv_hash[slot] - 1;
}

static const struct gguf_kv *find(const het_gguf *g, const char *key)
{
    return kv_at(g, het_gguf_find_key(g, key));
}

static bool is_signed_type(enum het_gguf_type t)
{
    return t == HET_GGUF_TYPE_INT8 || t == HET_GGUF_TYPE_INT16 || t == HET_GGUF_TYPE_INT32 ||
           t == HET_GGUF_TYPE_INT64;
}

static bool is_unsigned_type(enum het_gguf_type t)
{
    return t == HET_GGUF_TYPE_UINT8 || t == HET_GGUF_TYPE_UINT16 || t == HET_GGUF_TYPE_UINT32 ||
           t == HET_GGUF_TYPE_UINT64;
}

bool het_gguf_get_int(const het_gguf *g, const char *key, int64_t *out)
{
    const struct gguf_kv *kv = find(g, key);
    if (!kv) return false;
    if (is_signed_type(kv->type)) {
        *out = kv->v.i;
        return true;
    }
    if (is_unsigned_type(kv->type) && kv->v.u <= INT64_MAX) {
        *out = (int64_t)kv->v.u;
        return true;
    }
    return false;
}

bool het_gguf_get_float(const het_gguf *g, const char *key, double *out)
{
    const struct gguf_kv *kv = find(g, key);
    if (!kv) return false;
    if (kv->type == HET_GGUF_TYPE_FLOAT32 || kv->type == HET_GGUF_TYPE_FLOAT64) *out = kv->v.f;
    else if (is_signed_type(kv->type)) *out = (double)kv->v.i;
    else if (is_unsigned_type(kv->type)) *out = (double)kv->v.u;
    else return false;
    return true;
}

bool het_gguf_get_bool(const het_gguf *g, const char *key, bool *out)
{
    const struct gguf_kv *kv = find(g, key);
    if (!kv || kv->type != HET_GGUF_TYPE_BOOL) return false;
    *out = kv->v.u != 0;
    return true;
}

const char *het_gguf_get_str(const het_gguf *g, const char *key)
{
    const struct gguf_kv *kv = find(g, key);
    return kv && kv->type == HET_GGUF_TYPE_STRING ? kv->str : NULL;
}

int64_t het_gguf_get_arr_n(const het_gguf *g, const char *key)
{
    const struct gguf_kv *kv = find(g, key);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr_n : -1;
}

enum het_gguf_type het_gguf_get_arr_type(const het_gguf *g, const char *key)
{
    const struct gguf_kv *kv = find(g, key);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr_type : HET_GGUF_TYPE_COUNT;
}

const void *het_gguf_get_arr_data(const het_gguf *g, const char *key)
{
    const struct gguf_kv *kv = find(g, key);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr : NULL;
}

const char *het_gguf_get_arr_str(const het_gguf *g, const char *key, int64_t i, size_t *len)
{
    return het_gguf_internal_arr_str(g, het_gguf_find_key(g, key), i, len);
}

const char *het_gguf_internal_arr_str(const het_gguf *g, int64_t k, int64_t i, size_t *len)
{
    const struct gguf_kv *kv = kv_at(g, k);
    if (!kv || kv->type != HET_GGUF_TYPE_ARRAY || kv->arr_type != HET_GGUF_TYPE_STRING) return NULL;
    if (i < 0 || i >= kv->arr_n) return NULL;
    if (len) *len = kv->lens[i];
    return kv->strs[i];
}

const union het_gguf_scalar *het_gguf_internal_scalar(const het_gguf *g, int64_t k)
{
    const struct gguf_kv *kv = kv_at(g, k);
    return kv && gguf_type_size(kv->type) ? &kv->v : NULL;
}

const char *het_gguf_internal_str(const het_gguf *g, int64_t k, size_t *len)
{
    const struct gguf_kv *kv = kv_at(g, k);
    if (!kv || kv->type != HET_GGUF_TYPE_STRING) return NULL;
    if (len) *len = kv->str_len;
    return kv->str;
}

const void *het_gguf_internal_arr(const het_gguf *g, int64_t k)
{
    const struct gguf_kv *kv = kv_at(g, k);
    return kv && kv->type == HET_GGUF_TYPE_ARRAY ? kv->arr : NULL;
}

const struct het_gguf_tensor_info *het_gguf_tensor(const het_gguf *g, int64_t i)
{
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

int64_t het_gguf_find_tensor(const het_gguf *g, const char *name)
{
    if (!g || !name || !g->t_hash) return -1;
    size_t slot = hash_slot(g->t_hash, g->t_hash_cap, name, strlen(name), tensor_name, g);
    return g->t_hash[slot] - 1;
}
