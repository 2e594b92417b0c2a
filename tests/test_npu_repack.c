/*
 * test_npu_repack.c — the NPU weight layout against the GGUF reference.
 *
 * For Q4_0, Q4_1, Q8_0 and Q4_K: random blocks (random bytes, so every
 * nibble, int8 and 6-bit sub-scale occurs) with fp16 scales drawn to include
 * the edges — +0, -0, subnormals, the smallest normal, 65504, negatives,
 * values whose low mantissa bits bf16 cannot hold — are repacked and
 * dequantised from the NPU layout; every float must equal het_dequantize_row
 * of the source bit for bit. Strided sources, several planes and N not a
 * multiple of the tile are included. Non-finite scales are refused with the
 * row named; shapes the contract cannot take are refused (layout check and
 * supports_op). The bf16 pair split is checked exhaustively over every
 * value Q4_K can produce (fp16 x 6-bit). Last, the repack cache: written
 * once, read back by a second device, and ignored when corrupted.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/npu/npu_layout.h"
#include "het/npu.h"
#include "model/quant_impl.h"
#include "sched/device_impl.h"
#include "testutil.h"

static uint16_t edge_fp16(void)
{
    static const uint16_t edges[] = {
        0x0000, 0x8000,          /* +0, -0                        */
        0x0001, 0x83FF, 0x0155,  /* subnormals                    */
        0x0400, 0x8400,          /* smallest normals               */
        0x7BFF, 0xFBFF,          /* +-65504                        */
        0x3C01, 0x3FFF, 0x2E67,  /* low mantissa bits set          */
    };
    const uint64_t r = het_test_rand_u64();
    if (r % 4 == 0) return edges[(r >> 8) % (sizeof edges / sizeof edges[0])];
    uint16_t h;
    do h = (uint16_t)(het_test_rand_u64() >> 17); while ((h & 0x7C00) == 0x7C00);   /* finite only */
    return h;
}

static void fill_random(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(het_test_rand_u64() >> 33);
}

/* Random source blocks of `type` for one row of K elements. */
static void random_row(enum het_type type, uint8_t *row, int64_t K)
{
    const struct het_type_traits *tr = het_type_get_traits(type);
    const int64_t nb = K / tr->blck_size;
    fill_random(row, (size_t)nb * tr->type_size);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = row + (size_t)b * tr->type_size;
        switch (type) {
        case HET_TYPE_Q4_0: ((het_block_q4_0 *)blk)->d = edge_fp16(); break;
        case HET_TYPE_Q8_0: ((het_block_q8_0 *)blk)->d = edge_fp16(); break;
        case HET_TYPE_Q4_1:
            ((het_block_q4_1 *)blk)->d = edge_fp16();
            ((het_block_q4_1 *)blk)->m = edge_fp16();
            break;
        case HET_TYPE_Q4_K:
            ((het_block_q4_k *)blk)->d = edge_fp16();
            ((het_block_q4_k *)blk)->dmin = edge_fp16();
            break;
        default: break;
        }
    }
}

struct shape { int64_t K, N, ne2, ne3; size_t row_pad; };

static int64_t neg_zero;   /* -0 results seen for the current type (edge coverage) */

static void check_roundtrip(enum het_type type, const struct shape *s)
{
    const size_t rs = het_type_row_size(type, s->K), stride = rs + s->row_pad;
    const int64_t rows = s->N * s->ne2 * s->ne3;
    uint8_t *src = malloc(stride * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        random_row(type, src + (size_t)r * stride, s->K);
        memset(src + (size_t)r * stride + rs, 0xA5, s->row_pad);     /* garbage between rows */
    }
    const int64_t ne[4] = { s->K, s->N, s->ne2, s->ne3 };
    const size_t nb[4] = { het_type_get_traits(type)->type_size, stride, stride * (size_t)s->N,
                           stride * (size_t)(s->N * s->ne2) };
    struct het_npu_wdesc d;
    het_error err = {0};
    enum het_status st = het_npu_layout_plan(&d, type, ne, &err);
    CHECK(st == HET_OK, "%s plan: %s", het_type_name(type), err.msg);
    if (st != HET_OK) { free(src); return; }
    CHECK(d.Npad % 32 == 0 && d.Npad >= d.N && d.Npad - d.N < 32, "Npad %lld for N %lld", (long long)d.Npad,
          (long long)d.N);
    uint8_t *dst = malloc(d.total_bytes);
    memset(dst, 0x5A, d.total_bytes);
    st = het_npu_repack(&d, src, nb, dst, &err);
    CHECK(st == HET_OK, "%s repack: %s", het_type_name(type), err.msg);
    float *ref = malloc(sizeof(float) * (size_t)s->K), *got = malloc(sizeof(float) * (size_t)s->K);
    int64_t mismatches = 0, values = 0;
    for (int64_t p = 0; st == HET_OK && p < s->ne2 * s->ne3; p++) {
        for (int64_t n = 0; n < s->N; n++) {
            het_dequantize_row(type, src + (size_t)(p * s->N + n) * stride, ref, s->K);
            het_npu_dequant_row(&d, dst, p, n, got);
            for (int64_t k = 0; k < s->K; k++) {
                uint32_t a, b;
                memcpy(&a, &ref[k], 4);
                memcpy(&b, &got[k], 4);
                if (a != b && mismatches++ < 3)
                    fprintf(stderr, "  %s plane %lld row %lld k %lld: GGUF %08x (%g) NPU %08x (%g)\n",
                            het_type_name(type), (long long)p, (long long)n, (long long)k, a, ref[k], b, got[k]);
                neg_zero += a == 0x80000000u;
                values++;
            }
        }
        for (int64_t n = s->N; n < d.Npad; n++) {              /* padding rows dequantise to zero */
            het_npu_dequant_row(&d, dst, p, n, got);
            for (int64_t k = 0; k < s->K; k++) mismatches += got[k] != 0.0f;
        }
    }
    CHECK(mismatches == 0, "%s K=%lld N=%lld planes=%lld: %lld of %lld values differ from the GGUF dequantisation",
          het_type_name(type), (long long)s->K, (long long)s->N, (long long)(s->ne2 * s->ne3), (long long)mismatches,
          (long long)values);
    free(ref);
    free(got);
    free(dst);
    free(src);
}

static void check_nonfinite(enum het_type type)
{
    const int64_t K = type == HET_TYPE_Q4_K ? 256 : 64, N = 3;
    const size_t rs = het_type_row_size(type, K);
    uint8_t *src = calloc((size_t)N, rs);
    for (int64_t n = 0; n < N; n++) random_row(type, src + (size_t)n * rs, K);
    /* row 2, first block: scale inf */
    uint8_t *blk = src + 2 * rs;
    const uint16_t inf = 0x7C00;
    if (type == HET_TYPE_Q4_K) memcpy(blk, &inf, 2);           /* d is the first field of every block type */
    else memcpy(blk, &inf, 2);
    const int64_t ne[4] = { K, N, 1, 1 };
    const size_t nb[4] = { het_type_get_traits(type)->type_size, rs, rs * N, rs * N };
    struct het_npu_wdesc d;
    het_npu_layout_plan(&d, type, ne, NULL);
    uint8_t *dst = malloc(d.total_bytes);
    het_error err = {0};
    enum het_status st = het_npu_repack(&d, src, nb, dst, &err);
    /* Q4_K with sub-scale 0 gives 0*inf = NaN; either way: refused, row 2 named */
    CHECK(st == HET_ERR_UNSUPPORTED && strstr(err.msg, "row 2"), "%s: inf scale gave %s '%s'", het_type_name(type),
          het_status_name(st), err.msg);
    free(dst);
    free(src);
}

static void check_shapes(void)
{
    het_error err = {0};
    const int64_t k172[4] = { 172, 64, 1, 1 };
    CHECK(het_npu_layout_check(HET_TYPE_Q8_0, k172, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "172"),
          "K = 172 accepted or not named: %s", err.msg);
    const int64_t ok[4] = { 4096, 11008, 1, 1 };
    CHECK(het_npu_layout_check(HET_TYPE_Q4_0, ok, &err) == HET_OK, "4096x11008 q4_0 refused: %s", err.msg);
    CHECK(het_npu_layout_check(HET_TYPE_Q6_K, ok, &err) == HET_ERR_UNSUPPORTED && strstr(err.msg, "q6_K"),
          "q6_K accepted: %s", err.msg);
    CHECK(het_npu_layout_check(HET_TYPE_F16, ok, &err) == HET_ERR_UNSUPPORTED, "f16 accepted");
    const int64_t k288[4] = { 288, 64, 1, 1 };
    CHECK(het_npu_layout_check(HET_TYPE_Q4_K, k288, &err) == HET_ERR_UNSUPPORTED, "q4_K with K = 288 accepted");
    CHECK(het_npu_layout_check(HET_TYPE_Q4_0, k288, &err) == HET_OK, "q4_0 with K = 288 refused: %s", err.msg);

    /* supports_op routes what the contract cannot take elsewhere */
    het_device *dev = het_npu_device_init(HET_NPU_EMULATE, &err);
    CHECK(dev != NULL, "emulated device: %s", err.msg);
    if (!dev) return;
    struct { enum het_type type; int64_t K; bool want; } cases[] = {
        { HET_TYPE_F16, 172, false }, { HET_TYPE_F32, 64, false }, { HET_TYPE_Q6_K, 256, false },
        { HET_TYPE_Q5_0, 64, false }, { HET_TYPE_Q4_0, 64, true }, { HET_TYPE_Q4_K, 256, true },
        { HET_TYPE_Q8_0, 96, true },  { HET_TYPE_Q4_1, 32, true },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t wne[2] = { cases[i].K, 40 }, xne[2] = { cases[i].K, 3 }, dne[2] = { 40, 3 };
        struct het_tensor w, x, y;
        het_tensor_init(&w, cases[i].type, 2, wne);
        het_tensor_init(&x, HET_TYPE_F32, 2, xne);
        het_tensor_init(&y, HET_TYPE_F32, 2, dne);
        static uint8_t buf[1 << 16];
        w.data = buf;
        w.flags = HET_TENSOR_FLAG_WEIGHT;
        x.data = buf;
        y.data = buf;
        y.op = HET_OP_MUL_MAT;
        y.src[0] = &w;
        y.src[1] = &x;
        CHECK(het_device_supports_op(dev, &y) == cases[i].want, "supports_op(%s, K=%lld) != %d",
              het_type_name(cases[i].type), (long long)cases[i].K, cases[i].want);
    }
    het_device_free(dev);
}

/* Every value Q4_K can make (fp16 d times a 6-bit sub-scale) splits exactly. */
static void check_split(void)
{
    long bad = 0, n = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        const float d = het_fp16_to_fp32((uint16_t)h);
        for (int sc = 0; sc < 64; sc++) {
            const float v = d * (float)sc;
            uint16_t hi, lo;
            n++;
            if (!het_npu_split_bf16(v, &hi, &lo)) { bad++; continue; }
            const float j = het_npu_join_bf16(hi, lo);
            bad += memcmp(&j, &v, 4) != 0;
        }
    }
    CHECK(bad == 0, "%ld of %ld fp16 x 6-bit values do not split into bf16 hi + lo exactly", bad, n);
    uint16_t hi, lo;
    CHECK(!het_npu_split_bf16(INFINITY, &hi, &lo) && !het_npu_split_bf16(NAN, &hi, &lo), "non-finite split accepted");
    CHECK(!het_npu_split_bf16(1.0f + 0x1p-9f + 0x1p-22f + 0x1p-23f, &hi, &lo),
          "a value spanning 24 bits claimed exact in bf16 x 2");
}

/* ---- the repack cache ---------------------------------------------------------- */

static het_device *cache_device(const char *dir, het_error *err)
{
    struct het_npu_params p;
    het_npu_params_default(&p, HET_NPU_EMULATE);
    p.cache_dir = dir;
    return het_npu_device_init_params(&p, err);
}

static void check_cache(void)
{
    char dir[] = "/tmp/het-npu-cache-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(false, "mkdtemp failed");
        return;
    }
    enum { NW = 3 };
    struct het_tensor w[NW];
    struct het_tensor *wp[NW];
    uint8_t *buf[NW];
    const enum het_type types[NW] = { HET_TYPE_Q4_0, HET_TYPE_Q4_K, HET_TYPE_Q8_0 };
    for (int i = 0; i < NW; i++) {
        const int64_t ne[2] = { 256, 33 + i };
        het_tensor_init(&w[i], types[i], 2, ne);
        het_tensor_set_name(&w[i], "blk.%d.weight", i);
        w[i].flags = HET_TENSOR_FLAG_WEIGHT;
        buf[i] = malloc(w[i].nb[2]);
        for (int64_t r = 0; r < ne[1]; r++) random_row(types[i], buf[i] + (size_t)r * w[i].nb[1], ne[0]);
        w[i].data = buf[i];
        wp[i] = &w[i];
    }
    het_error err = {0};
    struct het_npu_stats s1 = {0}, s2 = {0}, s3 = {0};
    het_device *a = cache_device(dir, &err);
    CHECK(a && het_device_prepare_weights(a, wp, NW, &err) == HET_OK, "prepare 1: %s", err.msg);
    if (a) het_npu_get_stats(a, &s1);
    CHECK(s1.repacked_tensors == NW && s1.cache_written == NW && s1.cache_loaded == 0,
          "first prepare: repacked %llu written %llu loaded %llu (%s)", (unsigned long long)s1.repacked_tensors,
          (unsigned long long)s1.cache_written, (unsigned long long)s1.cache_loaded, s1.cache_note);
    for (int i = 0; i < NW; i++) w[i].extra = NULL;
    het_device *b = cache_device(dir, &err);
    CHECK(b && het_device_prepare_weights(b, wp, NW, &err) == HET_OK, "prepare 2: %s", err.msg);
    if (b) het_npu_get_stats(b, &s2);
    CHECK(s2.cache_loaded == NW && s2.repacked_tensors == 0, "second prepare: loaded %llu repacked %llu (%s)",
          (unsigned long long)s2.cache_loaded, (unsigned long long)s2.repacked_tensors, s2.cache_note);
    CHECK(w[0].extra != NULL, "t->extra not set by prepare_weights");

    /* corrupt one data byte: the file is ignored, repacked and rewritten */
    FILE *f = fopen(s1.cache_path, "r+b");
    CHECK(f != NULL, "cache file %s missing", s1.cache_path);
    if (f) {
        fseek(f, -100, SEEK_END);
        int ch = fgetc(f);
        fseek(f, -100, SEEK_END);
        fputc(ch ^ 0x40, f);
        fclose(f);
    }
    for (int i = 0; i < NW; i++) w[i].extra = NULL;
    het_device *c = cache_device(dir, &err);
    CHECK(c && het_device_prepare_weights(c, wp, NW, &err) == HET_OK, "prepare 3: %s", err.msg);
    if (c) het_npu_get_stats(c, &s3);
    CHECK(s3.cache_loaded == 0 && s3.repacked_tensors == NW && strstr(s3.cache_note, "hash mismatch"),
          "corrupted cache: loaded %llu repacked %llu note '%s'", (unsigned long long)s3.cache_loaded,
          (unsigned long long)s3.repacked_tensors, s3.cache_note);
    /* non-resident weights stream straight out of the cache mapping: same result */
    struct het_npu_params sp;
    het_npu_params_default(&sp, HET_NPU_EMULATE);
    sp.cache_dir = dir;
    sp.pin_budget = 1;
    sp.staging_bytes = 16384;
    for (int i = 0; i < NW; i++) w[i].extra = NULL;
    het_device *e = het_npu_device_init_params(&sp, &err);
    CHECK(e && het_device_prepare_weights(e, wp, NW, &err) == HET_OK, "prepare 4: %s", err.msg);
    struct het_npu_stats s4 = {0};
    if (e) het_npu_get_stats(e, &s4);
    CHECK(s4.cache_loaded == NW, "streaming device loaded %llu from the cache", (unsigned long long)s4.cache_loaded);
    const int64_t xne[2] = { 256, 3 }, yne[2] = { 34, 3 };
    struct het_tensor x, y1, y2;
    het_tensor_init(&x, HET_TYPE_F32, 2, xne);
    het_tensor_init(&y1, HET_TYPE_F32, 2, yne);
    float xb[256 * 3], o1[34 * 3], o2[34 * 3];
    het_test_fill_normal(xb, 256 * 3, 1.0f);
    x.data = xb;
    y1.op = HET_OP_MUL_MAT;
    y1.src[0] = &w[1];
    y1.src[1] = &x;
    y2 = y1;
    y1.data = o1;
    y2.data = o2;
    struct het_tensor *n1 = &y1, *n2 = &y2;
    CHECK(c && e && het_device_run_split(c, &n1, 1, &err) == HET_OK && het_device_run_split(e, &n2, 1, &err) == HET_OK,
          "run: %s", err.msg);
    if (e) het_npu_get_stats(e, &s4);
    CHECK(s4.streamed_bytes > 0 && memcmp(o1, o2, sizeof o1) == 0, "streamed from the cache mapping: %llu bytes, "
          "outputs %s", (unsigned long long)s4.streamed_bytes, memcmp(o1, o2, sizeof o1) ? "differ" : "equal");
    het_device_free(e);
    het_device_free(a);
    het_device_free(b);
    het_device_free(c);
    unlink(s1.cache_path);
    rmdir(dir);
    for (int i = 0; i < NW; i++) free(buf[i]);
}

int main(void)
{
    het_test_seed(20240611);
    const enum het_type types[] = { HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q8_0, HET_TYPE_Q4_K };
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const bool k = types[t] == HET_TYPE_Q4_K;
        const struct shape shapes[] = {
            { k ? 256 : 32, 1, 1, 1, 0 },              /* one group, one row */
            { k ? 768 : 224, 45, 1, 1, 0 },            /* odd groups, N padded */
            { k ? 512 : 96, 70, 2, 1, 24 },            /* strided rows, two planes */
            { k ? 256 : 160, 33, 2, 3, 8 },            /* 4-D: six planes */
        };
        neg_zero = 0;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) check_roundtrip(types[t], &shapes[s]);
        /* signed zeros occur (edge scales include -0) and were reproduced above */
        CHECK(neg_zero > 0, "%s: the edge values never produced -0; the test lost its edge cases",
              het_type_name(types[t]));
        check_nonfinite(types[t]);
    }
    check_split();
    check_shapes();
    check_cache();
    return het_test_finish();
}
