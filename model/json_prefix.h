/*
 * json_prefix.h — a byte-at-a-time recogniser of the prefixes of one JSON
 * object (RFC 8259), used by the sampler's json_object constraint to keep
 * only tokens whose text continues a valid object. The state is a small
 * value type: copy it, feed a candidate's bytes, keep it or drop it.
 */
#ifndef HET_MODEL_JSON_PREFIX_H
#define HET_MODEL_JSON_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HET_JSON_MAX_DEPTH 32   /* deeper nesting is refused            */
#define HET_JSON_MAX_WS    8    /* whitespace bytes in a row            */

struct het_json_prefix {
    uint8_t stack[HET_JSON_MAX_DEPTH]; /* '{' or '[' per open container */
    uint8_t depth;
    uint8_t st;          /* state (json_prefix.c)                        */
    uint8_t key;         /* the string being read is an object key        */
    uint8_t lit, lit_pos;/* literal (true/false/null) and bytes matched   */
    uint8_t hex;         /* \u hex digits still to come                   */
    uint8_t cont;        /* UTF-8 continuation bytes still to come        */
    uint8_t cont_lo, cont_hi; /* the range of the next one (no overlongs,
                                 surrogates or code points past U+10FFFF) */
    uint8_t ws;          /* whitespace bytes in a row                     */
};

void het_json_prefix_init(struct het_json_prefix *j);
/* Feed n bytes; false (state then undefined) when they cannot continue a
 * JSON object. */
bool het_json_prefix_feed(struct het_json_prefix *j, const char *s, size_t n);
/* The object is complete: nothing may follow. */
bool het_json_prefix_done(const struct het_json_prefix *j);

#endif /* HET_MODEL_JSON_PREFIX_H */
