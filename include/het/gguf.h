/*
 * gguf.h — reading and writing GGUF files (v2 and v3).
 *
 * The reader maps the file and validates every count, length, offset,
 * alignment, type and shape against the file size before anything is used;
 * a malformed file yields HET_ERR_FORMAT with one line naming the field and
 * its byte offset, never a crash or an out-of-bounds read. After a successful
 * open every accessor is safe. Strings are returned NUL-terminated (copied
 * once at open); numeric arrays are returned as aligned copies.
 *
 * The writer collects key/values and tensors in memory and writes a v3 file.
 */
#ifndef HET_GGUF_H
#define HET_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"
#include "het/type.h"

#ifdef __cplusplus
extern "C" {
#endif

enum het_gguf_type {
    HET_GGUF_TYPE_UINT8   = 0,
    HET_GGUF_TYPE_INT8    = 1,
    HET_GGUF_TYPE_UINT16  = 2,
    HET_GGUF_TYPE_INT16   = 3,
    HET_GGUF_TYPE_UINT32  = 4,
    HET_GGUF_TYPE_INT32   = 5,
    HET_GGUF_TYPE_FLOAT32 = 6,
    HET_GGUF_TYPE_BOOL    = 7,
    HET_GGUF_TYPE_STRING  = 8,
    HET_GGUF_TYPE_ARRAY   = 9,
    HET_GGUF_TYPE_UINT64  = 10,
    HET_GGUF_TYPE_INT64   = 11,
    HET_GGUF_TYPE_FLOAT64 = 12,
    HET_GGUF_TYPE_COUNT,
};

typedef struct het_gguf het_gguf;

struct het_gguf_tensor_info {
    const char   *name;
    enum het_type type;
    int           n_dims;
    int64_t       ne[4];      /* unused dims are 1                                   */
    uint64_t      offset;     /* from the start of the data section                  */
    size_t        size;       /* bytes (het_type_row_size(type, ne0) * rows)         */
    const void   *data;       /* into the mapping; NULL in vocab-only files          */
    uint64_t      info_offset;/* file offset of this tensor's info record (messages) */
};

/* ---- reader -------------------------------------------------------------- */
/* NULL on error (err filled: "gguf: <path>: <field> at offset N: <problem>"). */
het_gguf *het_gguf_open(const char *path, het_error *err);
/* Parse a buffer the caller keeps alive (fuzzing, tests). */
het_gguf *het_gguf_open_memory(const void *data, size_t size, het_error *err);
void      het_gguf_close(het_gguf *g);   /* NULL is a no-op */

uint32_t    het_gguf_version(const het_gguf *g);
size_t      het_gguf_alignment(const het_gguf *g);
uint64_t    het_gguf_data_offset(const het_gguf *g);      /* file offset of the data section */
const void *het_gguf_file_data(const het_gguf *g, size_t *size);

/* key/values by index (for listing) */
int64_t            het_gguf_n_kv(const het_gguf *g);
const char        *het_gguf_kv_key(const het_gguf *g, int64_t i);
enum het_gguf_type het_gguf_kv_type(const het_gguf *g, int64_t i);
/* for arrays: element type and count */
enum het_gguf_type het_gguf_kv_arr_type(const het_gguf *g, int64_t i);
int64_t            het_gguf_kv_arr_n(const het_gguf *g, int64_t i);
/* index of key or -1 */
int64_t            het_gguf_find_key(const het_gguf *g, const char *key);

/* Typed getters by key. They return false when the key is absent or has an
 * incompatible type (getters convert between integer widths, and int/float
 * for get_float, when the value fits). */
bool        het_gguf_get_int(const het_gguf *g, const char *key, int64_t *out);
bool        het_gguf_get_float(const het_gguf *g, const char *key, double *out);
bool        het_gguf_get_bool(const het_gguf *g, const char *key, bool *out);
const char *het_gguf_get_str(const het_gguf *g, const char *key);   /* NULL if absent */
/* arrays */
int64_t            het_gguf_get_arr_n(const het_gguf *g, const char *key);    /* -1 if absent/not array */
enum het_gguf_type het_gguf_get_arr_type(const het_gguf *g, const char *key);
/* numeric array contents, naturally aligned, element type as stored */
const void        *het_gguf_get_arr_data(const het_gguf *g, const char *key);
/* element i of a string array, NUL-terminated; *len (optional) gets the byte
 * length (strings may contain NUL bytes). NULL if out of range. */
const char        *het_gguf_get_arr_str(const het_gguf *g, const char *key, int64_t i, size_t *len);
/* value of key i rendered for display ("[151936 strings]" for long arrays) */
void               het_gguf_kv_format(const het_gguf *g, int64_t i, char *buf, size_t cap);

/* tensors */
int64_t het_gguf_n_tensors(const het_gguf *g);
const struct het_gguf_tensor_info *het_gguf_tensor(const het_gguf *g, int64_t i);
int64_t het_gguf_find_tensor(const het_gguf *g, const char *name);   /* -1 if absent */

const char *het_gguf_type_name(enum het_gguf_type t);

/* ---- writer -------------------------------------------------------------- */
typedef struct het_gguf_writer het_gguf_writer;

het_gguf_writer *het_gguf_writer_init(void);
void             het_gguf_writer_free(het_gguf_writer *w);
/* Setting a key that exists replaces it. */
enum het_status het_gguf_writer_set_u32(het_gguf_writer *w, const char *key, uint32_t v);
enum het_status het_gguf_writer_set_i32(het_gguf_writer *w, const char *key, int32_t v);
enum het_status het_gguf_writer_set_u64(het_gguf_writer *w, const char *key, uint64_t v);
enum het_status het_gguf_writer_set_f32(het_gguf_writer *w, const char *key, float v);
enum het_status het_gguf_writer_set_bool(het_gguf_writer *w, const char *key, bool v);
enum het_status het_gguf_writer_set_str(het_gguf_writer *w, const char *key, const char *v);
/* numeric array (elem type not STRING/ARRAY), data copied */
enum het_status het_gguf_writer_set_arr(het_gguf_writer *w, const char *key, enum het_gguf_type elem,
                                        const void *data, int64_t n);
enum het_status het_gguf_writer_set_arr_str(het_gguf_writer *w, const char *key, const char *const *strs,
                                            int64_t n);
/* Copy key i of a reader (any type, arrays included). */
enum het_status het_gguf_writer_copy_kv(het_gguf_writer *w, const het_gguf *src, int64_t i);
/* Add a tensor; data (size = row_size * rows bytes) is copied unless it is
 * NULL, in which case het_gguf_writer_set_tensor_data must be called later. */
enum het_status het_gguf_writer_add_tensor(het_gguf_writer *w, const char *name, enum het_type type,
                                           int n_dims, const int64_t *ne, const void *data);
enum het_status het_gguf_writer_set_tensor_data(het_gguf_writer *w, const char *name, const void *data);
/* Write the file (alignment 32 unless general.alignment says otherwise);
 * on error the partial file is removed. */
enum het_status het_gguf_writer_write(het_gguf_writer *w, const char *path, het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_GGUF_H */
