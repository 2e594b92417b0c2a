/*
 * gguf_internal.h — what the GGUF reader shares with the writer and with
 * gguf_format.c (internal to model/): raw access to decoded values, so that
 * copying a key preserves its exact type and bytes (strings may hold NULs).
 */
#ifndef HET_MODEL_GGUF_INTERNAL_H
#define HET_MODEL_GGUF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/gguf.h"

/* A decoded scalar: unsigned types and bool in u, signed in i, floats in f. */
union het_gguf_scalar {
    uint64_t u;
    int64_t  i;
    double   f;
};

/* Byte size of a numeric/bool type; 0 for STRING, ARRAY and unknown ids. */
size_t het_gguf_internal_type_size(enum het_gguf_type t);
/* Key k's scalar value, NULL unless k is a numeric or bool key. */
const union het_gguf_scalar *het_gguf_internal_scalar(const het_gguf *g, int64_t k);
/* Key k's string (and its byte length), NULL unless k is a STRING key. */
const char *het_gguf_internal_str(const het_gguf *g, int64_t k, size_t *len);
/* Key k's numeric array elements (as stored), NULL unless k is an array. */
const void *het_gguf_internal_arr(const het_gguf *g, int64_t k);
/* Element i of key k's string array, NULL if k is not one or i is out of range. */
const char *het_gguf_internal_arr_str(const het_gguf *g, int64_t k, int64_t i, size_t *len);

/* True when the tensor data is a read-only mmap of the file (het_gguf_open),
 * false for a caller's buffer (het_gguf_open_memory). */
bool het_gguf_internal_is_mapped(const het_gguf *g);

#endif /* HET_MODEL_GGUF_INTERNAL_H */
