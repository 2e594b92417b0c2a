/*
 * utf8.h — the UTF-8 checks the server needs: generated text arrives one
 * token piece at a time, and a piece may end inside a multi-byte character
 * (byte-fallback tokens) or hold bytes that are not UTF-8 at all. JSON
 * strings must be valid UTF-8, so text is held back while a character is
 * incomplete and invalid bytes become U+FFFD when sent.
 */
#ifndef HET_SERVE_UTF8_H
#define HET_SERVE_UTF8_H

#include <stdbool.h>
#include <stddef.h>

#include "serve/strbuf.h"

/* Length of the valid UTF-8 sequence starting at s (1..4), or 0 if the bytes
 * at s are not one (bad lead byte, bad continuation, overlong, surrogate,
 * > U+10FFFF, or cut short by n). */
size_t het_utf8_seq_len(const unsigned char *s, size_t n);
bool   het_utf8_valid(const char *s, size_t n);
/* Bytes at the end of s that begin a character not yet complete (0..3): they
 * could still become valid when more bytes arrive. */
size_t het_utf8_incomplete_tail(const char *s, size_t n);
/* Append s to out with every invalid byte replaced by U+FFFD. */
bool   het_utf8_sanitize(struct het_strbuf *out, const char *s, size_t n);

#endif /* HET_SERVE_UTF8_H */
