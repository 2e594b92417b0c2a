/*
 * tokenizer_unicode.c — the little Unicode the tokenizers need outside PCRE2.
 *
 * UTF-8 decoding with llama.cpp's error rule (a malformed byte becomes
 * U+FFFD and decoding resumes at the next byte), encoding, the White_Space
 * set, and two table lookups for WordPiece: simple lowercase and the first
 * code point of a character's canonical decomposition (which is how
 * llama.cpp strips accents). Category tests are left to PCRE2's \p{..}.
 */
#include <stddef.h>
#include <stdint.h>

#include "model/tokenizer_impl.h"
#include "model/tokenizer_unicode_tables.h"

#define HET_REPLACEMENT 0xFFFDu

static bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* One code point at s[0..n); *used gets the bytes consumed. */
static uint32_t decode_one(const unsigned char *s, size_t n, size_t *used)
{
    unsigned char c = s[0];
    *used = 1;
    if (c < 0x80) return c;
    if ((c & 0xE0) == 0xC0) {
        if (n < 2 || !is_cont(s[1])) return HET_REPLACEMENT;
        *used = 2;
        return ((uint32_t)(c & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0) {
        if (n < 3 || !is_cont(s[1]) || !is_cont(s[2])) return HET_REPLACEMENT;
        *used = 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0) {
        if (n < 4 || !is_cont(s[1]) || !is_cont(s[2]) || !is_cont(s[3])) return HET_REPLACEMENT;
        *used = 4;
        uint32_t cpt = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
                       ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return cpt > 0x10FFFF ? HET_REPLACEMENT : cpt;
    }
    return HET_REPLACEMENT;   /* stray continuation byte or 0xF8..0xFF */
}

size_t het_utf8_decode(const char *s, size_t n, uint32_t *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        size_t used;
        out[k++] = decode_one(p + i, n - i, &used);
        i += used;
    }
    return k;
}

size_t het_utf8_encode(uint32_t cpt, char *out)
{
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (char)(0xC0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (char)(0xE0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cpt >> 18));
    out[1] = (char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cpt & 0x3F));
    return 4;
}

bool het_unicode_is_space(uint32_t c)
{
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

uint32_t het_unicode_tolower(uint32_t cpt)
{
    size_t lo = 0, hi = sizeof het_unicode_lower / sizeof het_unicode_lower[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (het_unicode_lower[mid][0] < cpt) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sizeof het_unicode_lower / sizeof het_unicode_lower[0] && het_unicode_lower[lo][0] == cpt)
        return het_unicode_lower[lo][1];
    return cpt;
}

uint32_t het_unicode_nfd_first(uint32_t cpt)
{
    size_t lo = 0, hi = sizeof het_unicode_nfd / sizeof het_unicode_nfd[0];
    while (lo < hi) {   /* first range whose last >= cpt */
        size_t mid = lo + (hi - lo) / 2;
        if (het_unicode_nfd[mid][1] < cpt) lo = mid + 1;
        else hi = mid;
    }
    if (lo < sizeof het_unicode_nfd / sizeof het_unicode_nfd[0] && het_unicode_nfd[lo][0] <= cpt)
        return het_unicode_nfd[lo][2];
    return cpt;
}
