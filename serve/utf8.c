/*
 * utf8.c — UTF-8 validation, incomplete-tail detection and repair (see
 * utf8.h). Follows RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF.
 */
#include "serve/utf8.h"

/* expected length from the lead byte, 0 if it cannot start a character */
static size_t lead_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* is byte k (k >= 1) of a sequence led by lead acceptable? */
static bool cont_ok(unsigned char lead, size_t k, unsigned char c)
{
    if ((c & 0xC0) != 0x80) return false;
    if (k != 1) return true;
    if (lead == 0xE0) return c >= 0xA0;             /* overlong */
    if (lead == 0xED) return c <= 0x9F;             /* surrogates */
    if (lead == 0xF0) return c >= 0x90;             /* overlong */
    if (lead == 0xF4) return c <= 0x8F;             /* > U+10FFFF */
    return true;
}

size_t het_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (n == 0) return 0;
    size_t len = lead_len(s[0]);
    if (len == 0 || len > n) return 0;
    for (size_t k = 1; k < len; k++)
        if (!cont_ok(s[0], k, s[k])) return 0;
    return len;
}

bool het_utf8_valid(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = het_utf8_seq_len(u + i, n - i);
        if (!l) return false;
        i += l;
    }
    return true;
}

size_t het_utf8_incomplete_tail(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    /* look back at most 3 bytes for a lead byte whose sequence runs past n */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        unsigned char c = u[n - back];
        if ((c & 0xC0) == 0x80) continue;  /* continuation: keep looking */
        size_t len = lead_len(c);
        if (len <= back) return 0;         /* complete (or invalid) */
        for (size_t k = 1; k < back; k++)
            if (!cont_ok(c, k, u[n - back + k])) return 0;
        return back;
    }
    return 0;
}

bool het_utf8_sanitize(struct het_strbuf *out, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0; /* start of the current valid run */
    for (size_t i = 0; i < n;) {
        size_t l = het_utf8_seq_len(u + i, n - i);
        if (l) {
            i += l;
            continue;
        }
        het_strbuf_append(out, s + run, i - run);
        het_strbuf_append(out, "\xEF\xBF\xBD", 3);
        run = ++i;
    }
    return het_strbuf_append(out, s + run, n - run);
}
