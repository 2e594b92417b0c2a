/*
 * gguf_format.c — rendering GGUF key values as one display line.
 *
 * Used by `hetrun info` style listings and error messages. Strings are shown
 * quoted with control bytes escaped; short arrays are shown in full, long
 * ones as a count ("[151936 strings]"). Output always fits the caller's
 * buffer and is NUL-terminated; an overlong value ends in "...".
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "het/gguf.h"
#include "model/gguf_internal.h"

#define GGUF_FORMAT_MAX_ELEMS   8   /* arrays longer than this are summarised */
#define GGUF_FORMAT_MAX_STR_ELEM 40 /* bytes shown per string array element   */

struct line {
    char  *buf;
    size_t cap, len;
    bool   cut;   /* something did not fit */
};

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
    if (l->len + 1 >= l->cap) {
        l->cut = true;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->buf + l->len, l->cap - l->len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (l->len + (size_t)n >= l->cap) l->cut = true;
    l->len = l->len + (size_t)n < l->cap ? l->len + (size_t)n : l->cap - 1;
}

static void put_quoted(struct line *l, const char *s, size_t n, size_t max)
{
    put(l, "\"");
    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') put(l, "\\%c", c);
        else if (c == '\n') put(l, "\\n");
        else if (c == '\t') put(l, "\\t");
        else if (c < 0x20 || c == 0x7f) put(l, "\\x%02x", c);
        else put(l, "%c", c);
    }
    put(l, n > max ? "\"..." : "\"");
}

static void put_scalar(struct line *l, enum het_gguf_type t, union het_gguf_scalar v)
{
    switch (t) {
    case HET_GGUF_TYPE_UINT8: case HET_GGUF_TYPE_UINT16: case HET_GGUF_TYPE_UINT32: case HET_GGUF_TYPE_UINT64:
        put(l, "%" PRIu64, v.u);
        break;
    case HET_GGUF_TYPE_INT8: case HET_GGUF_TYPE_INT16: case HET_GGUF_TYPE_INT32: case HET_GGUF_TYPE_INT64:
        put(l, "%" PRId64, v.i);
        break;
    case HET_GGUF_TYPE_FLOAT32: put(l, "%.7g", v.f); break;
    case HET_GGUF_TYPE_FLOAT64: put(l, "%.15g", v.f); break;
    case HET_GGUF_TYPE_BOOL:    put(l, "%s", v.u ? "true" : "false"); break;
    default:                    put(l, "?"); break;
    }
}

/* Element i of a numeric array as a scalar. */
static union het_gguf_scalar arr_elem(enum het_gguf_type t, const void *arr, int64_t i)
{
    union het_gguf_scalar v = { 0 };
    const unsigned char *p = (const unsigned char *)arr + (size_t)i * het_gguf_internal_type_size(t);
    switch (t) {
    case HET_GGUF_TYPE_UINT8: case HET_GGUF_TYPE_BOOL: v.u = *p; break;
    case HET_GGUF_TYPE_INT8:    v.i = *(const int8_t *)p; break;
    case HET_GGUF_TYPE_UINT16:  v.u = *(const uint16_t *)p; break;
    case HET_GGUF_TYPE_INT16:   v.i = *(const int16_t *)p; break;
    case HET_GGUF_TYPE_UINT32:  v.u = *(const uint32_t *)p; break;
    case HET_GGUF_TYPE_INT32:   v.i = *(const int32_t *)p; break;
    case HET_GGUF_TYPE_UINT64:  v.u = *(const uint64_t *)p; break;
    case HET_GGUF_TYPE_INT64:   v.i = *(const int64_t *)p; break;
    case HET_GGUF_TYPE_FLOAT32: v.f = *(const float *)p; break;
    case HET_GGUF_TYPE_FLOAT64: v.f = *(const double *)p; break;
    default: break;
    }
    return v;
}

static void put_array(struct line *l, const het_gguf *g, int64_t k)
{
    enum het_gguf_type et = het_gguf_kv_arr_type(g, k);
    int64_t n = het_gguf_kv_arr_n(g, k);
    if (n > GGUF_FORMAT_MAX_ELEMS) {
        put(l, "[%" PRId64 " %s]", n, et == HET_GGUF_TYPE_STRING ? "strings" : het_gguf_type_name(et));
        return;
    }
    const void *arr = het_gguf_internal_arr(g, k);
    put(l, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i) put(l, ", ");
        if (et == HET_GGUF_TYPE_STRING) {
            size_t len = 0;
            const char *s = het_gguf_internal_arr_str(g, k, i, &len);
            put_quoted(l, s ? s : "", len, GGUF_FORMAT_MAX_STR_ELEM);
        } else {
            put_scalar(l, et, arr_elem(et, arr, i));
        }
    }
    put(l, "]");
}

void het_gguf_kv_format(const het_gguf *g, int64_t i, char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    struct line l = { buf, cap, 0, false };
    buf[0] = '\0';
    enum het_gguf_type t = het_gguf_kv_type(g, i);
    if (t == HET_GGUF_TYPE_STRING) {
        size_t len = 0;
        const char *s = het_gguf_internal_str(g, i, &len);
        put_quoted(&l, s, len, cap);
    } else if (t == HET_GGUF_TYPE_ARRAY) {
        put_array(&l, g, i);
    } else if (t < HET_GGUF_TYPE_COUNT) {
        put_scalar(&l, t, *het_gguf_internal_scalar(g, i));
    }
    /* mark truncation */
    if (l.cut && cap >= 4) memcpy(buf + cap - 4, "...", 4);
}
