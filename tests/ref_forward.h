/*
 * ref_forward.h — a plain scalar F32 forward pass of the llama family, the
 * reference het's graph and kernels are checked against. Written like
 * llama2.c: dequantise every weight to F32 once, then loops.
 */
#ifndef HET_REF_FORWARD_H
#define HET_REF_FORWARD_H

#include "het/model.h"

struct ref_model;
/* Dequantise m's weights (any type) into a scalar reference model. */
struct ref_model *ref_model_init(const het_model *m);
void ref_model_free(struct ref_model *r);
/* Logits for every position of tokens[0..n): out is n x n_vocab. F32 KV. */
int ref_forward(struct ref_model *r, const int32_t *tokens, int n, float *out);

#endif
