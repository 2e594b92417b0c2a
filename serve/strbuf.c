/*
 * strbuf.c — growable byte buffer (see strbuf.h). Growth doubles, so
 * appending a stream of small pieces is amortised O(1).
 */
#include "serve/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(struct het_strbuf *b, size_t extra)
{
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool het_strbuf_append(struct het_strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return false;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return true;
}

bool het_strbuf_puts(struct het_strbuf *b, const char *s)
{
    return het_strbuf_append(b, s, strlen(s));
}

bool het_strbuf_printf(struct het_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return false;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return true;
}

void het_strbuf_clear(struct het_strbuf *b)
{
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

void het_strbuf_free(struct het_strbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *het_strbuf_take(struct het_strbuf *b, size_t *len)
{
    if (!b->p && !b->oom) reserve(b, 0);
    if (b->oom) {
        het_strbuf_free(b);
        return NULL;
    }
    b->p[b->len] = 0;
    char *p = b->p;
    if (len) *len = b->len;
    memset(b, 0, sizeof *b);
    return p;
}
