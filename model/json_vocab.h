/*
 * json_vocab.h — the json_object constraint's view of a vocabulary: every
 * token's text, and which tokens may continue a JSON object from a given
 * recogniser state (json_prefix.h). Internal to the sampler (sample.c).
 */
#ifndef HET_MODEL_JSON_VOCAB_H
#define HET_MODEL_JSON_VOCAB_H

#include <stdbool.h>
#include <stdint.h>

#include "het/model.h"
#include "model/json_prefix.h"

struct het_json_vocab;

/* NULL when out of memory. End-of-generation tokens and tokens without text
 * are never allowed. */
struct het_json_vocab *het_json_vocab_new(const het_tokenizer *tok, int32_t n_vocab);
void                   het_json_vocab_free(struct het_json_vocab *v);
/* token's text (*len bytes, not NUL-terminated) */
const char            *het_json_vocab_piece(const struct het_json_vocab *v, int32_t token, uint32_t *len);
/* Set w[t] to -INFINITY for every token t whose text cannot continue the
 * object from state j (w has n_vocab entries). */
void                   het_json_vocab_mask(const struct het_json_vocab *v, const struct het_json_prefix *j, float *w);

#endif /* HET_MODEL_JSON_VOCAB_H */
