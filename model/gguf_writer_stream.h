/*
 * gguf_writer_stream.h — writing GGUF tensors produced on the fly (internal).
 *
 * het_gguf_writer_write() needs every tensor's bytes in memory up front; a
 * model generator would then hold the whole model. Here tensors added with
 * data == NULL are instead filled by a callback, one at a time, right before
 * they are written, so peak memory is the largest single tensor.
 */
#ifndef HET_MODEL_GGUF_WRITER_STREAM_H
#define HET_MODEL_GGUF_WRITER_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "het/gguf.h"

/* Fill dst (size bytes: the tensor's full data) for tensor i (in add order). */
typedef enum het_status (*het_gguf_tensor_fill_fn)(void *user, int64_t i, const char *name, void *dst,
                                                   size_t size, het_error *err);

/* Like het_gguf_writer_write, calling fill for tensors that have no data. */
enum het_status het_gguf_writer_write_stream(het_gguf_writer *w, const char *path, het_gguf_tensor_fill_fn fill,
                                             void *user, het_error *err);

int64_t     het_gguf_writer_n_tensors(const het_gguf_writer *w);
const char *het_gguf_writer_tensor_name(const het_gguf_writer *w, int64_t i);

#endif /* HET_MODEL_GGUF_WRITER_STREAM_H */
