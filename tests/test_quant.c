/*
 * test_quant.c — element types, fp16/bf16 conversion and the reference
 * (de)quantisers (sched/type.c, model/quant.c, model/quant_k.c).
 *
 * What is checked, strongest first:
 *  - byte-exactness against llama.cpp: the synthetic fixtures were quantised
 *    by llama.cpp from one set of F32 weights (llama-tiny-f32.gguf; the qwen3
 *    files hold the same draws for the tensors they share), so quantising the
 *    F32 source here must reproduce their Q4_0, Q5_0 and Q8_0 tensors byte for
 *    byte;
 *  - golden hashes of quantised bytes and dequantised floats for every type
 *    on deterministic data, the expected values produced by ggml's own
 *    quantize_row_*_ref / dequantize_row_* (this covers the K-quants, which
 *    the fixtures do not contain: their rows of 64/192 are not multiples of
 *    256, so llama.cpp fell back to Q5_0/Q8_0);
 *  - hand-built blocks decoded against the GGUF layout description;
 *  - round-trip error bounds per type, special values, argument checks;
 *  - fp16/bf16 conversion of every binary16 value, every rounding midpoint
 *    and a sweep of binary32 inputs against a slow independent reference.
 */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "het/gguf.h"
#include "het/type.h"
#include "model/quant_impl.h"

static float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits_from_f32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- type table ---------------------------------------------------------- */

struct expect_type { uint32_t id; const char *name; int64_t blck; size_t size; };

/* GGUF type ids, names, elements per block and bytes per block. */
static const struct expect_type expected_types[] = {
    {0, "f32", 1, 4},         {1, "f16", 1, 2},          {2, "q4_0", 32, 18},
    {3, "q4_1", 32, 20},      {6, "q5_0", 32, 22},       {7, "q5_1", 32, 24},
    {8, "q8_0", 32, 34},      {9, "q8_1", 32, 36},       {10, "q2_K", 256, 84},
    {11, "q3_K", 256, 110},   {12, "q4_K", 256, 144},    {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210},   {15, "q8_K", 256, 292},    {16, "iq2_xxs", 256, 66},
    {17, "iq2_xs", 256, 74},  {18, "iq3_xxs", 256, 98},  {19, "iq1_s", 256, 50},
    {20, "iq4_nl", 32, 18},   {21, "iq3_s", 256, 110},   {22, "iq2_s", 256, 82},
    {23, "iq4_xs", 256, 136}, {24, "i8", 1, 1},          {25, "i16", 1, 2},
    {26, "i32", 1, 4},        {27, "i64", 1, 8},         {28, "f64", 1, 8},
    {29, "iq1_m", 256, 56},   {30, "bf16", 1, 2},
};

static void test_type_table(void)
{
    bool seen[64] = {false};
    for (size_t i = 0; i < sizeof expected_types / sizeof expected_types[0]; i++) {
        const struct expect_type *e = &expected_types[i];
        const struct het_type_traits *t = het_type_get_traits((enum het_type)e->id);
        seen[e->id] = true;
        CHECK(het_type_is_known(e->id), "type %u should be known", e->id);
        CHECK(t && strcmp(t->name, e->name) == 0, "type %u name %s, want %s", e->id, t ? t->name : "NULL", e->name);
        CHECK(t->blck_size == e->blck && t->type_size == e->size, "type %s: blck %lld size %zu, want %lld %zu",
              e->name, (long long)t->blck_size, t->type_size, (long long)e->blck, e->size);
        CHECK(t->is_quantized == (e->blck > 1), "type %s is_quantized", e->name);
        CHECK(het_type_from_name(e->name) == (enum het_type)e->id, "from_name(%s)", e->name);
        CHECK(strcmp(het_type_name((enum het_type)e->id), e->name) == 0, "het_type_name(%u)", e->id);
        CHECK(het_type_row_size((enum het_type)e->id, e->blck * 3) == 3 * e->size, "row_size %s", e->name);
    }
    for (uint32_t id = 0; id < 64; id++)
        if (!seen[id]) CHECK(!het_type_is_known(id), "type id %u must not be known", id);
    CHECK(!het_type_is_known(0xFFFFFFFFu), "huge id");
    const struct het_type_traits *bad = het_type_get_traits((enum het_type)4);
    CHECK(bad != NULL && bad->type_size == 0 && bad->blck_size >= 1, "traits of invalid id 4");
    CHECK(het_type_get_traits((enum het_type)1000)->type_size == 0, "traits of id 1000");
    CHECK(het_type_row_size((enum het_type)5, 32) == 0, "row size of invalid id");

    /* the block structs agree with the table */
    CHECK(sizeof(het_block_q4_0) == het_type_get_traits(HET_TYPE_Q4_0)->type_size, "q4_0 struct");
    CHECK(sizeof(het_block_q4_1) == het_type_get_traits(HET_TYPE_Q4_1)->type_size, "q4_1 struct");
    CHECK(sizeof(het_block_q5_0) == het_type_get_traits(HET_TYPE_Q5_0)->type_size, "q5_0 struct");
    CHECK(sizeof(het_block_q5_1) == het_type_get_traits(HET_TYPE_Q5_1)->type_size, "q5_1 struct");
    CHECK(sizeof(het_block_q8_0) == het_type_get_traits(HET_TYPE_Q8_0)->type_size, "q8_0 struct");
    CHECK(sizeof(het_block_q8_1) == het_type_get_traits(HET_TYPE_Q8_1)->type_size, "q8_1 struct");
    CHECK(sizeof(het_block_q2_k) == het_type_get_traits(HET_TYPE_Q2_K)->type_size, "q2_K struct");
    CHECK(sizeof(het_block_q3_k) == het_type_get_traits(HET_TYPE_Q3_K)->type_size, "q3_K struct");
    CHECK(sizeof(het_block_q4_k) == het_type_get_traits(HET_TYPE_Q4_K)->type_size, "q4_K struct");
    CHECK(sizeof(het_block_q5_k) == het_type_get_traits(HET_TYPE_Q5_K)->type_size, "q5_K struct");
    CHECK(sizeof(het_block_q6_k) == het_type_get_traits(HET_TYPE_Q6_K)->type_size, "q6_K struct");
    CHECK(sizeof(het_block_q8_k) == het_type_get_traits(HET_TYPE_Q8_K)->type_size, "q8_K struct");

    CHECK(het_type_from_name("Q4_K") == HET_TYPE_Q4_K, "case-insensitive Q4_K");
    CHECK(het_type_from_name("q6_k") == HET_TYPE_Q6_K, "case-insensitive q6_k");
    CHECK(het_type_from_name("BF16") == HET_TYPE_BF16, "BF16");
    CHECK(het_type_from_name("q4_2") == HET_TYPE_COUNT, "withdrawn q4_2");
    CHECK(het_type_from_name("") == HET_TYPE_COUNT, "empty name");
    CHECK(het_type_from_name("q4_0x") == HET_TYPE_COUNT, "trailing junk");
    CHECK(het_type_from_name(NULL) == HET_TYPE_COUNT, "NULL name");
    CHECK(het_type_row_size(HET_TYPE_F32, 7) == 28, "f32 row of 7");
    CHECK(het_type_row_size(HET_TYPE_Q4_K, 512) == 288, "q4_K row of 512");
    CHECK(het_type_row_size(HET_TYPE_Q4_0, 0) == 0, "empty row");
}

/* ---- fp16 / bf16 ----------------------------------------------------------- */

/* Value of binary16 bits h (non-NaN), computed from the definition. */
static double ref_half_value(uint16_t h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? INFINITY : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Nearest binary16 to finite f by binary search over the ordered positive
 * codes, ties to the even code, overflow past 65520 to infinity. */
static uint16_t ref_to_half(float f)
{
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (a >= 65520.0) return sign | 0x7C00;
    uint16_t lo = 0, hi = 0x7BFF;               /* find largest code <= a */
    while (lo < hi) {
        uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (ref_half_value(mid) <= a) lo = mid; else hi = (uint16_t)(mid - 1);
    }
    uint16_t best = lo;
    if (lo < 0x7C00) {
        double below = a - ref_half_value(lo), above = ref_half_value((uint16_t)(lo + 1)) - a;
        if (above < below || (above == below && (lo & 1))) best = (uint16_t)(lo + 1);
    }
    return sign | best;
}

static uint16_t ref_to_bf16(float f)
{
    uint32_t u = bits_from_f32(f);
    uint16_t t = (uint16_t)(u >> 16);
    double a = (double)f, down = het_bf16_to_fp32(t), up = het_bf16_to_fp32((uint16_t)(t + 1));
    if (isinf(up)) up = copysign(ldexp(1.0, 128), a);   /* where the next code would be */
    double dd = fabs(a - down), du = fabs(up - a);
    if (du < dd || (du == dd && (t & 1))) return (uint16_t)(t + 1);
    return t;
}

static int fp16_fail_budget = 20;

static void check_to_half(float f)
{
    uint16_t got = het_fp32_to_fp16(f);
    if (isnan(f)) {
        CHECK((got & 0x7C00) == 0x7C00 && (got & 0x3FF) != 0 && (got & 0x8000) == ((bits_from_f32(f) >> 16) & 0x8000),
              "fp16(nan 0x%08x) = 0x%04x", bits_from_f32(f), got);
        return;
    }
    uint16_t want = ref_to_half(f);
    if (got != want && fp16_fail_budget-- > 0)
        CHECK(got == want, "fp32_to_fp16(%a = 0x%08x) = 0x%04x, want 0x%04x", f, bits_from_f32(f), got, want);
    else if (got == want)
        het_test.passed++;
}

static void check_to_bf16(float f)
{
    uint16_t got = het_fp32_to_bf16(f);
    if (isnan(f)) {
        CHECK(isnan(het_bf16_to_fp32(got)) && (got & 0x40), "bf16(nan 0x%08x) = 0x%04x", bits_from_f32(f), got);
        return;
    }
    uint16_t want = ref_to_bf16(f);
    if (got != want && fp16_fail_budget-- > 0)
        CHECK(got == want, "fp32_to_bf16(%a) = 0x%04x, want 0x%04x", f, got, want);
    else if (got == want)
        het_test.passed++;
}

static void test_fp16(void)
{
    /* every binary16 value: exact widening, and narrowing gives it back */
    int bad_widen = 0, bad_round = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = het_fp16_to_fp32((uint16_t)h);
        bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        if (nan) {
            bad_widen += !isnan(f) || ((bits_from_f32(f) >> 13) & 0x3FF) != (h & 0x3FF);
            bad_round += het_fp32_to_fp16(f) != (uint16_t)(h | 0x200);   /* quieted, payload kept */
        } else {
            double want = ref_half_value((uint16_t)h);
            bad_widen += (double)f != want || (signbit(f) != 0) != ((h & 0x8000) != 0);
            bad_round += het_fp32_to_fp16(f) != h;
        }
    }
    CHECK(bad_widen == 0, "%d binary16 values widen wrongly", bad_widen);
    CHECK(bad_round == 0, "%d binary16 values do not round-trip", bad_round);

    /* every midpoint between neighbouring codes (exact in binary32) and its
     * neighbours: the tie rule and the carry into the exponent */
    for (uint32_t h = 0; h < 0x7C00; h++) {
        double mid = (ref_half_value((uint16_t)h) + (h == 0x7BFF ? 65536.0 : ref_half_value((uint16_t)(h + 1)))) / 2;
        float m = (float)mid;
        CHECK((double)m == mid, "midpoint of 0x%04x not exact", h);
        float cases[3] = { m, nextafterf(m, 0.0f), nextafterf(m, INFINITY) };
        for (int k = 0; k < 3; k++) {
            check_to_half(cases[k]);
            check_to_half(-cases[k]);
        }
    }
    /* a sweep of binary32 bit patterns, all exponents */
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 0x1003)
        check_to_half(f32_from_bits((uint32_t)u));
    const float specials[] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN,
                               0x1p-149f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 0x1.8p-24f, 65504.0f,
                               65519.996f, 65520.0f, 1e10f, f32_from_bits(0x7F800001), f32_from_bits(0xFFC12345) };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) check_to_half(specials[i]);
    CHECK(het_fp32_to_fp16(0x1p-25f) == 0x0000, "2^-25 ties to even zero");
    CHECK(het_fp32_to_fp16(0x1.8p-24f) == 0x0002, "1.5*2^-24 ties to even 2");
    CHECK(het_fp32_to_fp16(65520.0f) == 0x7C00, "65520 rounds to inf");
    CHECK(het_fp32_to_fp16(-0.0f) == 0x8000, "-0");

    /* bf16: widening is exact by construction; narrowing */
    int bad_bf16 = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = het_bf16_to_fp32((uint16_t)h);
        if (!isnan(f)) bad_bf16 += het_fp32_to_bf16(f) != h;
        if (h % 7 == 0 && !isnan(f) && !isinf(f) && (h & 0x7FFF) != 0x7F7F) {
            /* the midpoint to the next code and its neighbours */
            uint32_t mb = ((uint32_t)h << 16) | 0x8000;
            check_to_bf16(f32_from_bits(mb));
            check_to_bf16(f32_from_bits(mb - 1));
            check_to_bf16(f32_from_bits(mb + 1));
        }
    }
    CHECK(bad_bf16 == 0, "%d bf16 values do not round-trip", bad_bf16);
    for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 0x1003) check_to_bf16(f32_from_bits((uint32_t)u));
    CHECK(het_fp32_to_bf16(f32_from_bits(0x3F808000)) == 0x3F80, "bf16 tie to even (down)");
    CHECK(het_fp32_to_bf16(f32_from_bits(0x3F818000)) == 0x3F82, "bf16 tie to even (up)");
    CHECK(het_fp32_to_bf16(f32_from_bits(0x7F7FFFFF)) == 0x7F80, "bf16 FLT_MAX rounds to inf");
    CHECK(het_fp32_to_bf16(NAN) != 0x7F80 && isnan(het_bf16_to_fp32(het_fp32_to_bf16(NAN))), "bf16 nan");
    CHECK(het_fp32_to_bf16(f32_from_bits(0x7F800001)) == 0x7FC0, "bf16 signalling nan quieted");
}

/* ---- hand-built blocks, decoded from the layout description ----------------- */

static void test_known_blocks(void)
{
    float out[256];

    /* Q4_0: element j<16 is the low nibble of qs[j], j>=16 the high nibble of qs[j-16] */
    het_block_q4_0 b40;
    b40.d = het_fp32_to_fp16(0.5f);
    for (int j = 0; j < 16; j++) b40.qs[j] = (uint8_t)(j | ((15 - j) << 4));
    CHECK(het_dequantize_row(HET_TYPE_Q4_0, &b40, out, 32) == HET_OK, "q4_0 dequant");
    int bad = 0;
    for (int j = 0; j < 16; j++) {
        bad += out[j] != 0.5f * (j - 8);
        bad += out[16 + j] != 0.5f * (7 - j);
    }
    CHECK(bad == 0, "q4_0 known block: %d wrong", bad);

    /* Q5_1: qh bit j is bit 4 of element j; value d*q + m */
    het_block_q5_1 b51;
    b51.d = het_fp32_to_fp16(0.25f);
    b51.m = het_fp32_to_fp16(-3.0f);
    uint32_t qh = 0xA5C3F00Fu;
    memcpy(b51.qh, &qh, 4);   /* little-endian host assumed (x86, arm64) */
    for (int j = 0; j < 16; j++) b51.qs[j] = (uint8_t)((j * 7 % 16) | ((j * 3 % 16) << 4));
    het_dequantize_row(HET_TYPE_Q5_1, &b51, out, 32);
    bad = 0;
    for (int j = 0; j < 32; j++) {
        int low = j < 16 ? (j * 7 % 16) : ((j - 16) * 3 % 16);
        int q = low | (int)(((qh >> j) & 1) << 4);
        bad += out[j] != 0.25f * q - 3.0f;
    }
    CHECK(bad == 0, "q5_1 known block: %d wrong", bad);

    /* Q4_K: eight 6-bit (scale, min) pairs; group g of 32 uses nibble g%2 of
     * qs[32*(g/2) + l]; value d*sc*q - dmin*m. Scales chosen so every bit of
     * the 12-byte packing matters. */
    const uint8_t sc[8] = { 1, 63, 17, 40, 5, 33, 62, 48 }, mn[8] = { 60, 2, 31, 16, 47, 0, 21, 63 };
    het_block_q4_k b4k;
    memset(&b4k, 0, sizeof b4k);
    b4k.d = het_fp32_to_fp16(0.125f);
    b4k.dmin = het_fp32_to_fp16(0.0625f);
    for (int g = 0; g < 4; g++) {
        b4k.scales[g] = (uint8_t)(sc[g] | ((sc[g + 4] >> 4) << 6));
        b4k.scales[g + 4] = (uint8_t)(mn[g] | ((mn[g + 4] >> 4) << 6));
        b4k.scales[g + 8] = (uint8_t)((sc[g + 4] & 15) | ((mn[g + 4] & 15) << 4));
    }
    for (int i = 0; i < 128; i++) b4k.qs[i] = (uint8_t)(i * 37 + 11);
    het_dequantize_row(HET_TYPE_Q4_K, &b4k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        int g = e / 32, l = e % 32;
        uint8_t byte = b4k.qs[32 * (g / 2) + l];
        int q = g % 2 ? byte >> 4 : byte & 15;
        float want = (0.125f * sc[g]) * q - 0.0625f * mn[g];
        bad += out[e] != want;
    }
    CHECK(bad == 0, "q4_K known block: %d wrong", bad);
    for (int g = 0; g < 8; g++) {
        uint8_t s, m;
        het_q4k_scale_min(g, b4k.scales, &s, &m);
        CHECK(s == sc[g] && m == mn[g], "het_q4k_scale_min group %d: %u/%u want %u/%u", g, s, m, sc[g], mn[g]);
    }

    /* Q5_K: as Q4_K plus bit (2*(g/2) + g%2) of qh[l] = 16 */
    het_block_q5_k b5k;
    memset(&b5k, 0, sizeof b5k);
    b5k.d = b4k.d;
    b5k.dmin = b4k.dmin;
    memcpy(b5k.scales, b4k.scales, 12);
    memcpy(b5k.qs, b4k.qs, 128);
    for (int l = 0; l < 32; l++) b5k.qh[l] = (uint8_t)(l * 89 + 3);
    het_dequantize_row(HET_TYPE_Q5_K, &b5k, out, 256);
    bad = 0;
    for (int e = 0; e < 256; e++) {
        int g = e / 32, l = e % 32;
        uint8_t byte = b5k.qs[32 * (g / 2) + l];
        int q = (g % 2 ? byte >> 4 : byte & 15) + 16 * ((b5k.qh[l] >> g) & 1);
        bad += out[e] != (0.125f * sc[g]) * q - 0.0625f * mn[g];
    }
    CHECK(bad == 0, "q5_K known block: %d wrong", bad);

    /* Q6_K: element e: half h = e/128, k = (e%128)/32, l = e%32;
     * low 4 bits: ql[64h + l + 32(k&1)] nibble k/2; high 2: qh[32h + l] >> 2k;
     * group scale scales[e/16]; value d*scale*(q-32). */
    het_block_q6_k b6k;
    for (int i = 0; i < 128; i++) b6k.ql[i] = (uint8_t)(i * 53 + 7);
    for (int i = 0; i < 64; i++) b6k.qh[i] = (uint8_t)(i * 101 + 5);
    for (int i = 0; i < 16; i++) b6k.scales[i] = (int8_t)(i * 17 - 128);
    b6k.d = het_fp32_to_fp16(0.01f);
    het_dequantize_row(HET_TYPE_Q6_K, &b6k, out, 256);
    bad = 0;
    const float d6 = het_fp16_to_fp32(b6k.d);
    for (int e = 0; e < 256; e++) {
        int h = e / 128, k = (e % 128) / 32, l = e % 32;
        uint8_t lb = b6k.ql[64 * h + l + 32 * (k & 1)];
        int q = ((k / 2) ? lb >> 4 : lb & 15) | (((b6k.qh[32 * h + l] >> (2 * k)) & 3) << 4);
        bad += out[e] != d6 * b6k.scales[e / 16] * (q - 32);
    }
    CHECK(bad == 0, "q6_K known block: %d wrong", bad);

    /* Q8_K: fp32 d */
    het_block_q8_k b8k;
    b8k.d = 0.75f;
    for (int i = 0; i < 256; i++) b8k.qs[i] = (int8_t)(i - 128);
    het_dequantize_row(HET_TYPE_Q8_K, &b8k, out, 256);
    bad = 0;
    for (int i = 0; i < 256; i++) bad += out[i] != 0.75f * (i - 128);
    CHECK(bad == 0, "q8_K known block: %d wrong", bad);

    /* Q4_0 quantiser on a ramp: max |x| = -4 (x[0]) gives d = 0.5 exactly */
    float ramp[32];
    for (int j = 0; j < 32; j++) ramp[j] = -4.0f + 0.25f * j;
    het_block_q4_0 q40;
    het_quantize_row(HET_TYPE_Q4_0, ramp, &q40, 32);
    CHECK(q40.d == het_fp32_to_fp16(0.5f), "q4_0 ramp scale 0x%04x", q40.d);
    /* code = trunc(x/d + 8.5), clipped to 15: -4 -> 0, -3.75 -> 1, ..., 3.75 -> 15 */
    bad = 0;
    for (int j = 0; j < 16; j++) {
        int want_lo = (int)(ramp[j] / 0.5f + 8.5f), want_hi = (int)(ramp[j + 16] / 0.5f + 8.5f);
        if (want_hi > 15) want_hi = 15;
        bad += q40.qs[j] != (uint8_t)(want_lo | (want_hi << 4));
    }
    CHECK(bad == 0, "q4_0 ramp quants: %d wrong", bad);

    /* Q8_0 ties: roundf rounds halves away from zero */
    float tie[32] = { 127.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.5f, 126.5f, -126.5f };
    het_block_q8_0 q80;
    het_quantize_row(HET_TYPE_Q8_0, tie, &q80, 32);
    CHECK(het_fp16_to_fp32(q80.d) == 1.0f, "q8_0 tie scale");
    const int8_t want8[8] = { 127, 1, -1, 2, -2, 3, 127, -127 };
    CHECK(memcmp(q80.qs, want8, 8) == 0, "q8_0 ties: %d %d %d %d %d %d %d %d", q80.qs[0], q80.qs[1],
          q80.qs[2], q80.qs[3], q80.qs[4], q80.qs[5], q80.qs[6], q80.qs[7]);
}

/* ---- round trips ------------------------------------------------------------ */

static const enum het_type all_types[] = {
    HET_TYPE_F32, HET_TYPE_F16, HET_TYPE_BF16, HET_TYPE_Q4_0, HET_TYPE_Q4_1, HET_TYPE_Q5_0,
    HET_TYPE_Q5_1, HET_TYPE_Q8_0, HET_TYPE_Q8_1, HET_TYPE_Q4_K, HET_TYPE_Q5_K, HET_TYPE_Q6_K,
    HET_TYPE_Q8_K,
};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

/* Largest error allowed for an element of a block whose absolute max is amax
 * and whose max-min is range: half a quantisation step, plus the fp16
 * rounding of the scale times the largest code (and of the min), or a full
 * step for Q4_0/Q5_0, whose top code is clipped when the extreme is negative.
 * Returns -1 for the K-quants, whose error is checked by nmse only. */
static double elem_bound(enum het_type t, double amax, double range)
{
    const double f16 = 1.0 / 1024;   /* relative error of an fp16 scale, doubled */
    switch (t) {
    case HET_TYPE_F32:  return 0;
    case HET_TYPE_F16:  return amax / 2048 + 3e-8;
    case HET_TYPE_BF16: return amax / 256;
    case HET_TYPE_Q4_0: return amax / 8 * (1 + 8 * f16) + amax * f16;
    case HET_TYPE_Q5_0: return amax / 16 * (1 + 16 * f16) + amax * f16;
    case HET_TYPE_Q4_1: return range / 15 * (0.5 + 15 * f16) + amax * f16;
    case HET_TYPE_Q5_1: return range / 31 * (0.5 + 31 * f16) + amax * f16;
    case HET_TYPE_Q8_0:
    case HET_TYPE_Q8_1: return amax / 127 * (0.5 + 127 * f16);
    case HET_TYPE_Q8_K: return amax / 127 * (0.5 + 1e-4);
    default:            return -1;
    }
}

static void test_round_trip(void)
{
    /* limits: about 1.5x the worst nmse of any 256-element chunk of 2^20
     * unit-normal values (measured: q4_0 1.1e-2, q4_1 9.9e-3, q5_0 3.4e-3,
     * q5_1 2.2e-3, q8_0 4.4e-5, q4_K 7.7e-3, q5_K 1.8e-3, q6_K 4.5e-4,
     * q8_K 1.1e-4, f16 6.3e-8, bf16 4.0e-6); a layout error gives ~1 */
    const double nmse_limit[HET_TYPE_COUNT] = {
        [HET_TYPE_Q4_0] = 1.6e-2, [HET_TYPE_Q4_1] = 1.5e-2,  [HET_TYPE_Q5_0] = 5e-3,  [HET_TYPE_Q5_1] = 3.3e-3,
        [HET_TYPE_Q8_0] = 6.6e-5, [HET_TYPE_Q8_1] = 6.6e-5,  [HET_TYPE_Q4_K] = 1.15e-2, [HET_TYPE_Q5_K] = 2.8e-3,
        [HET_TYPE_Q6_K] = 7e-4,   [HET_TYPE_Q8_K] = 1.7e-4,  [HET_TYPE_F16] = 1e-7,   [HET_TYPE_BF16] = 6e-6,
        [HET_TYPE_F32] = 0,
    };
    het_test_seed(7);
    for (size_t k = 0; k < N_TYPES; k++) {
        enum het_type t = all_types[k];
        const int64_t blck = het_type_get_traits(t)->blck_size;
        const int64_t nblk_cases[3] = { 1, 3, 37 };
        for (int c = 0; c < 3; c++) {
            int64_t n = blck * nblk_cases[c];
            if (blck == 1) n = 1 + 97 * nblk_cases[c];   /* odd sizes for plain types */
            float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
            uint8_t *q = malloc(het_type_row_size(t, n) + 1);
            het_test_fill_normal(x, (size_t)n, 1.0f);
            q[het_type_row_size(t, n)] = 0x5A;   /* canary */
            CHECK(het_quantize_row(t, x, q, n) == HET_OK, "quantize %s n=%lld", het_type_name(t), (long long)n);
            CHECK(q[het_type_row_size(t, n)] == 0x5A, "%s wrote past the row", het_type_name(t));
            CHECK(het_dequantize_row(t, q, y, n) == HET_OK, "dequantize %s", het_type_name(t));
            double e = het_test_nmse(y, x, (size_t)n);
            CHECK(e <= nmse_limit[t], "%s n=%lld nmse %.3g > %.3g", het_type_name(t), (long long)n, e, nmse_limit[t]);
            const int64_t bs = blck == 1 ? n : blck;     /* elements sharing one scale */
            int over = 0;
            for (int64_t b0 = 0; b0 < n && elem_bound(t, 1, 1) >= 0; b0 += bs) {
                double amax = 0, lo = INFINITY, hi = -INFINITY;
                for (int64_t i = b0; i < b0 + bs && i < n; i++) {
                    amax = fmax(amax, fabs(x[i]));
                    lo = fmin(lo, x[i]);
                    hi = fmax(hi, x[i]);
                }
                double bound = elem_bound(t, amax, hi - lo);
                for (int64_t i = b0; i < b0 + bs && i < n; i++) over += fabs((double)y[i] - x[i]) > bound;
            }
            CHECK(over == 0, "%s n=%lld: %d elements over the per-element bound", het_type_name(t), (long long)n, over);
            free(x); free(y); free(q);
        }
    }
}

/* ---- special inputs and argument checks ---------------------------------------- */

static void test_special(void)
{
    enum { N = 512 };
    static float x[N], y[N];
    static uint8_t q[N * 4 + 64];
    for (size_t k = 0; k < N_TYPES; k++) {
        enum het_type t = all_types[k];
        const char *nm = het_type_name(t);
        /* zeros stay zeros */
        memset(x, 0, sizeof x);
        het_quantize_row(t, x, q, N);
        het_dequantize_row(t, q, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += y[i] != 0.0f;
        CHECK(bad == 0, "%s: zero row dequantises to %d non-zeros", nm, bad);
        /* a constant row is reproduced closely */
        for (int i = 0; i < N; i++) x[i] = -0.3f;
        het_quantize_row(t, x, q, N);
        het_dequantize_row(t, q, y, N);
        CHECK(het_test_max_abs_diff(y, x, N) <= 0.3 * 4e-3, "%s: constant row error %g", nm, het_test_max_abs_diff(y, x, N));
        /* one spike in a zero block */
        memset(x, 0, sizeof x);
        x[77] = 1000.0f;
        het_quantize_row(t, x, q, N);
        het_dequantize_row(t, q, y, N);
        CHECK(fabsf(y[77] - 1000.0f) <= 1000.0f * 2e-3f && fabsf(y[76]) <= 1000.0f * 2e-3f, "%s: spike %g / %g", nm, y[77], y[76]);
        /* tiny values (fp16 scales underflow) and huge ones must stay finite */
        for (int i = 0; i < N; i++) x[i] = (float)((i % 13) - 6) * 1e-30f;
        het_quantize_row(t, x, q, N);
        het_dequantize_row(t, q, y, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += !isfinite(y[i]) || fabsf(y[i]) > 1e-28f;
        CHECK(bad == 0, "%s: tiny row gives %d bad values", nm, bad);
        for (int i = 0; i < N; i++) x[i] = (float)((i % 13) - 6) * 1000.0f;
        het_quantize_row(t, x, q, N);
        het_dequantize_row(t, q, y, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += !isfinite(y[i]);
        CHECK(bad == 0, "%s: large row gives %d non-finite values", nm, bad);
        /* NaN and inf inputs: no crash, no undefined behaviour (run under UBSan in CI) */
        for (int i = 0; i < N; i++) x[i] = (i % 5 == 0) ? NAN : (i % 7 == 0) ? INFINITY : -(float)i;
        CHECK(het_quantize_row(t, x, q, N) == HET_OK, "%s: non-finite input", nm);
        CHECK(het_dequantize_row(t, q, y, N) == HET_OK, "%s: dequant after non-finite input", nm);
        /* argument checks */
        if (het_type_get_traits(t)->blck_size > 1)
            CHECK(het_quantize_row(t, x, q, het_type_get_traits(t)->blck_size + 1) == HET_ERR_INVALID, "%s: odd n", nm);
        CHECK(het_dequantize_row(t, q, y, -32) == HET_ERR_INVALID, "%s: negative n", nm);
        CHECK(het_dequantize_row(t, NULL, y, N) == HET_ERR_INVALID, "%s: NULL src", nm);
        CHECK(het_quantize_row(t, x, NULL, N) == HET_ERR_INVALID, "%s: NULL dst", nm);
        CHECK(het_dequantize_row(t, NULL, NULL, 0) == HET_OK, "%s: empty row", nm);
    }
    CHECK(het_dequantize_row(HET_TYPE_Q2_K, q, y, 256) == HET_ERR_UNSUPPORTED, "q2_K unsupported");
    CHECK(het_quantize_row(HET_TYPE_I32, x, q, 4) == HET_ERR_UNSUPPORTED, "i32 unsupported");
    CHECK(het_dequantize_row((enum het_type)16, q, y, 256) == HET_ERR_UNSUPPORTED, "iq2_xxs unsupported");
    CHECK(het_dequantize_row((enum het_type)4, q, y, 32) == HET_ERR_INVALID, "id 4 invalid");
    CHECK(het_quantize_row((enum het_type)99, x, q, 32) == HET_ERR_INVALID, "id 99 invalid");
}

/* ---- golden hashes from ggml's reference implementation ------------------------- */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Deterministic inputs built with exact float arithmetic only (no libm), so
 * the same bits arise on every IEEE machine. Seven kinds of row: uniform,
 * outliers, positive, zero groups (and a zero super-block), small integers
 * (rounding ties), tiny (fp16 scales underflow), large. */
static void golden_input(float *x, int64_t n, int mode)
{
    for (int64_t i = 0; i < n; i++) {
        float u = (float)((int32_t)(het_test_rand_u64() >> 40) - (1 << 23)) * 0x1p-23f;
        float v;
        switch (mode) {
        case 0:  v = u; break;
        case 1:  v = i % 13 == 0 ? u * 32.0f : u; break;
        case 2:  v = u * u + 0.25f; break;
        case 3:  v = (i / 32) % 3 == 0 || i < 256 ? 0.0f : u; break;
        case 4:  v = (float)((int)(u * 8.0f)) * 0.125f; break;
        case 5:  v = u * 0x1p-30f; break;
        default: v = u * 0x1p13f; break;
        }
        x[i] = v;
    }
}

static void test_golden(void)
{
    /* Expected hashes: FNV-1a 64 over, for modes 0..6, the quantised row of
     * 16384 elements followed by its dequantisation (NaN bits canonicalised),
     * then a dequantisation of 16384 elements' worth of random bytes. They were
     * computed by ggml's own reference code (ggml-quants.c, quantize_row_*_ref
     * and dequantize_row_*; Q8_1 has no ggml dequantiser, so its dequant of
     * ggml bytes uses d*q as GGUF defines it), compiled without FMA
     * contraction. */
    static const struct { enum het_type t; uint64_t quant, random; } golden[] = {
        { HET_TYPE_Q4_0, 0x5044d9eade42c3dcull, 0x5f51192bfd75229dull },
        { HET_TYPE_Q4_1, 0x617ab7b962361f16ull, 0xbdba6bfc857020ceull },
        { HET_TYPE_Q5_0, 0x085ef83b7c77f696ull, 0x63260ed2c4c3eb02ull },
        { HET_TYPE_Q5_1, 0x591a030d24c6333eull, 0x8e34369558edcf88ull },
        { HET_TYPE_Q8_0, 0x1d7a74aaec59528dull, 0x6d4e2e9fcf20b5b6ull },
        { HET_TYPE_Q8_1, 0xa6b09b11f7efa47aull, 0x6dcff66f998ab9a4ull },
        { HET_TYPE_Q4_K, 0x56c0b9a87fcecbe4ull, 0x2827a8326e0432baull },
        { HET_TYPE_Q5_K, 0xea681d1a137a959dull, 0x143dab15fa053cafull },
        { HET_TYPE_Q6_K, 0xf69fb889108dc85dull, 0xb867c7e797edf5fbull },
        { HET_TYPE_Q8_K, 0xff26b026bff36723ull, 0x1ebb2a6abf7c07c3ull },
    };
    enum { N = 16384 };
    static float x[N], y[N];
    static uint8_t q[N * 2];
    for (size_t k = 0; k < sizeof golden / sizeof golden[0]; k++) {
        enum het_type t = golden[k].t;
        size_t rs = het_type_row_size(t, N);
        uint64_t h = 1469598103934665603ull;
        het_test_seed(1234);
        for (int mode = 0; mode < 7; mode++) {
            golden_input(x, N, mode);
            memset(q, 0, sizeof q);
            het_quantize_row(t, x, q, N);
            het_dequantize_row(t, q, y, N);
            for (int i = 0; i < N; i++) if (isnan(y[i])) y[i] = NAN;
            h = fnv1a(h, q, rs);
            h = fnv1a(h, y, sizeof y);
        }
        uint64_t hr = 1469598103934665603ull;
        het_test_seed(99);
        for (size_t i = 0; i < rs; i++) q[i] = (uint8_t)het_test_rand_u64();
        het_dequantize_row(t, q, y, N);
        for (int i = 0; i < N; i++) if (isnan(y[i])) y[i] = NAN;
        hr = fnv1a(hr, y, sizeof y);
        CHECK(h == golden[k].quant, "%s: quantise/dequantise hash %016llx, ggml gives %016llx", het_type_name(t),
              (unsigned long long)h, (unsigned long long)golden[k].quant);
        CHECK(hr == golden[k].random, "%s: dequantise(random bytes) hash %016llx, ggml gives %016llx",
              het_type_name(t), (unsigned long long)hr, (unsigned long long)golden[k].random);
    }
}

/* ---- byte-exactness against llama.cpp-quantised fixtures -------------------------- */

static het_gguf *open_fixture(const char *rel)
{
    const char *path = het_test_shared(rel);
    if (!het_test_file_exists(path)) return NULL;
    het_error err;
    het_gguf *g = het_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, g ? "" : err.msg);
    return g;
}

/*
 * Quantise the F32 source rows of every quantised tensor of q (up to the rows
 * both files have) with that tensor's type and require identical bytes; also
 * require the file's dequantised values to be within the format's error of
 * the source. Returns the number of blocks compared.
 */
static int64_t compare_with_source(het_gguf *src, het_gguf *q, const char *qname)
{
    int64_t blocks = 0;
    for (int64_t i = 0; i < het_gguf_n_tensors(q); i++) {
        const struct het_gguf_tensor_info *tq = het_gguf_tensor(q, i);
        if (tq->type == HET_TYPE_F32) continue;
        int64_t j = het_gguf_find_tensor(src, tq->name);
        CHECK(j >= 0, "%s: %s not in the F32 source", qname, tq->name);
        if (j < 0) continue;
        const struct het_gguf_tensor_info *ts = het_gguf_tensor(src, j);
        CHECK(ts->type == HET_TYPE_F32 && ts->ne[0] == tq->ne[0], "%s: %s shape/type", qname, tq->name);
        if (ts->type != HET_TYPE_F32 || ts->ne[0] != tq->ne[0]) continue;
        const int64_t ne0 = ts->ne[0];
        const int64_t rows = ts->ne[1] < tq->ne[1] ? ts->ne[1] : tq->ne[1];
        const size_t rs = het_type_row_size(tq->type, ne0), bsz = het_type_get_traits(tq->type)->type_size;
        uint8_t *buf = malloc(rs);
        float *deq = malloc((size_t)ne0 * sizeof *deq);
        int64_t bad_blocks = 0, nb = 0;
        double nmse_num = 0, nmse_den = 0;
        for (int64_t r = 0; r < rows; r++) {
            const float *x = (const float *)ts->data + r * ne0;
            const uint8_t *ref = (const uint8_t *)tq->data + r * rs;
            CHECK(het_quantize_row(tq->type, x, buf, ne0) == HET_OK, "%s: quantize %s", qname, tq->name);
            for (size_t b = 0; b < rs; b += bsz, nb++) bad_blocks += memcmp(buf + b, ref + b, bsz) != 0;
            het_dequantize_row(tq->type, ref, deq, ne0);
            for (int64_t e = 0; e < ne0; e++) {
                double d = (double)deq[e] - x[e];
                nmse_num += d * d;
                nmse_den += (double)x[e] * x[e];
            }
        }
        double nmse = nmse_num / nmse_den;
        double limit = tq->type == HET_TYPE_Q4_0 ? 1e-2 : tq->type == HET_TYPE_Q5_0 ? 3e-3 : 1e-4;
        CHECK(bad_blocks == 0, "%s: %s (%s): %lld of %lld blocks differ from llama.cpp's", qname, tq->name,
              het_type_name(tq->type), (long long)bad_blocks, (long long)nb);
        CHECK(nmse < limit, "%s: %s dequantised nmse %.3g vs source", qname, tq->name, nmse);
        blocks += nb;
        free(buf);
        free(deq);
    }
    return blocks;
}

static void test_fixtures(void)
{
    het_gguf *f32 = open_fixture("models/synthetic/llama-tiny-f32.gguf");
    if (!f32) {
        if (het_test.failed) return;   /* report the failures rather than a skip */
        het_test_skip("models/synthetic fixtures not found (HET_SHARED_DIR); other checks passed");
    }
    const char *quantised[] = {
        "models/synthetic/llama-tiny-q4_0.gguf",     /* Q4_0 + Q8_0 output */
        "models/synthetic/qwen3-tiny-q8_0.gguf",     /* Q8_0; shares the llama draws */
        "models/synthetic/qwen3-tiny-q4_k_m.gguf",   /* Q5_0/Q8_0 fallbacks of Q4_K/Q6_K */
    };
    for (size_t i = 0; i < sizeof quantised / sizeof quantised[0]; i++) {
        het_gguf *q = open_fixture(quantised[i]);
        CHECK(q != NULL, "fixture %s missing", quantised[i]);
        if (!q) continue;
        int64_t blocks = compare_with_source(f32, q, quantised[i]);
        printf("%s: %lld blocks compared byte for byte\n", quantised[i], (long long)blocks);
        CHECK(blocks > 60000, "%s: only %lld blocks compared", quantised[i], (long long)blocks);
        het_gguf_close(q);
    }
    het_gguf_close(f32);
}

int main(void)
{
    test_type_table();
    test_fp16();
    test_known_blocks();
    test_round_trip();
    test_special();
    test_golden();
    test_fixtures();
    return het_test_finish();
}
