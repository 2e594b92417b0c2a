/*
 * strbuf.h — a growable NUL-terminated byte buffer for the server's JSON,
 * SSE frames, metrics text and generated text. An allocation failure sets
 * oom and turns later appends into no-ops, so callers check once at the end.
 */
#ifndef HET_SERVE_STRBUF_H
#define HET_SERVE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct het_strbuf {
    char  *p;      /* NUL-terminated when non-NULL */
    size_t len;
    size_t cap;
    bool   oom;
};

bool het_strbuf_append(struct het_strbuf *b, const char *s, size_t n);
bool het_strbuf_puts(struct het_strbuf *b, const char *s);
bool het_strbuf_printf(struct het_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void het_strbuf_clear(struct het_strbuf *b);        /* len = 0, keeps the memory */
void het_strbuf_free(struct het_strbuf *b);         /* back to all-zero          */
/* Hand the bytes to the caller (malloc'ed, NUL-terminated; "" when empty). */
char *het_strbuf_take(struct het_strbuf *b, size_t *len);

#endif /* HET_SERVE_STRBUF_H */
