/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Every input is parsed with het_gguf_open_memory from an exactly sized
 * buffer; when it opens, every accessor is exercised (key listing, typed
 * getters, string and numeric arrays, display formatting, tensor table and
 * the first/last byte of each tensor's data) and every key is copied into a
 * writer, so any read past what the reader validated shows up under ASan.
 * Seeds: fuzz/corpus/gguf/.
 *
 *   CC=clang cmake -S . -B build-fuzz -DHET_FUZZ=ON \
 *       -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link,address,undefined"
 *   cmake --build build-fuzz --target fuzz_gguf
 *   build-fuzz/fuzz_gguf -max_total_time=60 -max_len=65536 /tmp/gguf-corpus fuzz/corpus/gguf
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "het/gguf.h"

static uint64_t touch_kv(const het_gguf *g, int64_t i)
{
    char buf[160];
    const char *key = het_gguf_kv_key(g, i);
    uint64_t sum = (uint64_t)het_gguf_kv_type(g, i) + (uint64_t)het_gguf_kv_arr_type(g, i) +
                   (uint64_t)het_gguf_kv_arr_n(g, i) + (uint64_t)het_gguf_find_key(g, key);
    het_gguf_kv_format(g, i, buf, sizeof buf);
    het_gguf_kv_format(g, i, buf, 5);
    sum += strlen(buf);
    int64_t iv;
    double dv;
    bool bv;
    if (het_gguf_get_int(g, key, &iv)) sum += (uint64_t)iv;
    if (het_gguf_get_float(g, key, &dv)) sum += dv == dv;
    if (het_gguf_get_bool(g, key, &bv)) sum += bv;
    const char *s = het_gguf_get_str(g, key);
    if (s) sum += strlen(s);
    int64_t n = het_gguf_get_arr_n(g, key);
    if (het_gguf_get_arr_type(g, key) == HET_GGUF_TYPE_STRING) {
        for (int64_t k = -1; k <= n; k++) {
            size_t len = 0;
            const char *e = het_gguf_get_arr_str(g, key, k, &len);
            if (e) sum += len + (unsigned char)e[len];
        }
    } else if (n > 0) {
        const unsigned char *d = het_gguf_get_arr_data(g, key);
        sum += d[0];
    }
    return sum;
}

static uint64_t touch_tensors(const het_gguf *g)
{
    uint64_t sum = 0;
    for (int64_t i = -1; i <= het_gguf_n_tensors(g); i++) {
        const struct het_gguf_tensor_info *t = het_gguf_tensor(g, i);
        if (!t) continue;
        const unsigned char *d = t->data;
        sum += d[0] + d[t->size - 1] + (uint64_t)het_gguf_find_tensor(g, t->name) + (uint64_t)t->ne[3];
        sum += strlen(het_type_name(t->type));
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    het_error err;
    het_gguf *g = het_gguf_open_memory(data, size, &err);
    if (!g) {
        /* the message must be one bounded line */
        return strlen(err.msg) < sizeof err.msg && !strchr(err.msg, '\n') ? 0 : (__builtin_trap(), 0);
    }
    volatile uint64_t sum = het_gguf_version(g) + het_gguf_alignment(g) + het_gguf_data_offset(g);
    size_t fsize;
    het_gguf_file_data(g, &fsize);
    for (int64_t i = -1; i <= het_gguf_n_kv(g); i++)
        if (i >= 0 && i < het_gguf_n_kv(g)) sum += touch_kv(g, i);
        else sum += het_gguf_kv_key(g, i) == NULL;
    sum += touch_tensors(g);
    het_gguf_writer *w = het_gguf_writer_init();
    for (int64_t i = 0; i < het_gguf_n_kv(g); i++)
        if (het_gguf_writer_copy_kv(w, g, i) != HET_OK) __builtin_trap();
    het_gguf_writer_free(w);
    het_gguf_close(g);
    (void)sum;
    return 0;
}
