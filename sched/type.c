/*
 * type.c — the element-type table (names, block sizes, bytes per block) for
 * every type id a GGUF file may carry, and the scalar fp16/bf16 conversions.
 *
 * The ids are GGUF's own (see include/het/type.h). IQ types are listed with
 * their sizes so that files containing them can be parsed and reported, but
 * het cannot compute with them. Ids 4 and 5 (the withdrawn Q4_2/Q4_3) are not
 * valid. The (de)quantisers themselves live in model/quant*.c.
 */
#include "het/type.h"

#include <string.h>
#include <strings.h>

#define QK_K HET_QK_K

static const struct het_type_traits type_table[HET_TYPE_COUNT] = {
    [HET_TYPE_F32]  = { "f32",  1,         4,                   false, true  },
    [HET_TYPE_F16]  = { "f16",  1,         2,                   false, true  },
    [HET_TYPE_Q4_0] = { "q4_0", HET_QK4_0, 2 + HET_QK4_0 / 2,   true,  true  },
    [HET_TYPE_Q4_1] = { "q4_1", HET_QK4_1, 4 + HET_QK4_1 / 2,   true,  true  },
    [HET_TYPE_Q5_0] = { "q5_0", HET_QK5_0, 6 + HET_QK5_0 / 2,   true,  true  },
    [HET_TYPE_Q5_1] = { "q5_1", HET_QK5_1, 8 + HET_QK5_1 / 2,   true,  true  },
    [HET_TYPE_Q8_0] = { "q8_0", HET_QK8_0, 2 + HET_QK8_0,       true,  true  },
    [HET_TYPE_Q8_1] = { "q8_1", HET_QK8_1, 4 + HET_QK8_1,       true,  false },
    [HET_TYPE_Q2_K] = { "q2_K", QK_K, QK_K / 16 + QK_K / 4 + 4,               true, false },
    [HET_TYPE_Q3_K] = { "q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2,           true, false },
    [HET_TYPE_Q4_K] = { "q4_K", QK_K, 4 + HET_K_SCALE_SIZE + QK_K / 2,        true, true  },
    [HET_TYPE_Q5_K] = { "q5_K", QK_K, 4 + HET_K_SCALE_SIZE + QK_K / 8 + QK_K / 2, true, true },
    [HET_TYPE_Q6_K] = { "q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2,    true, true  },
    [HET_TYPE_Q8_K] = { "q8_K", QK_K, 4 + QK_K + QK_K / 16 * 2,               true, false },
    /* IQ formats: sizes only (d fp16 + payload) */
    [16] = { "iq2_xxs", QK_K, 2 + QK_K / 8 * 2,                     true, false },
    [17] = { "iq2_xs",  QK_K, 2 + QK_K / 8 * 2 + QK_K / 32,         true, false },
    [18] = { "iq3_xxs", QK_K, 2 + 3 * QK_K / 8,                     true, false },
    [19] = { "iq1_s",   QK_K, 2 + QK_K / 8 + QK_K / 16,             true, false },
    [20] = { "iq4_nl",  32,   2 + 16,                               true, false },
    [21] = { "iq3_s",   QK_K, 2 + 13 * (QK_K / 32) + QK_K / 64,     true, false },
    [22] = { "iq2_s",   QK_K, 2 + QK_K / 4 + QK_K / 16,             true, false },
    [23] = { "iq4_xs",  QK_K, 2 + 2 + QK_K / 64 + QK_K / 2,         true, false },
    [HET_TYPE_I8]   = { "i8",   1, 1, false, false },
    [HET_TYPE_I16]  = { "i16",  1, 2, false, false },
    [HET_TYPE_I32]  = { "i32",  1, 4, false, false },
    [HET_TYPE_I64]  = { "i64",  1, 8, false, false },
    [HET_TYPE_F64]  = { "f64",  1, 8, false, false },
    [29] = { "iq1_m",   QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32,     true, false },
    [HET_TYPE_BF16] = { "bf16", 1, 2, false, true  },
};

/* Returned for ids outside the table so callers never get NULL; a zero
 * type_size marks it (blck_size stays 1 so nothing divides by zero). */
static const struct het_type_traits invalid_traits = { "invalid", 1, 0, false, false };

bool het_type_is_known(uint32_t type)
{
    return type < HET_TYPE_COUNT && type_table[type].name != NULL;
}

const struct het_type_traits *het_type_get_traits(enum het_type type)
{
    return het_type_is_known((uint32_t)type) ? &type_table[type] : &invalid_traits;
}

const char *het_type_name(enum het_type type)
{
    return het_type_get_traits(type)->name;
}

size_t het_type_row_size(enum het_type type, int64_t n)
{
    const struct het_type_traits *t = het_type_get_traits(type);
    if (n <= 0) return 0;
    return t->type_size * (size_t)(n / t->blck_size);
}

enum het_type het_type_from_name(const char *name)
{
    if (!name) return HET_TYPE_COUNT;
    for (int i = 0; i < HET_TYPE_COUNT; i++)
        if (type_table[i].name && strcasecmp(type_table[i].name, name) == 0)
            return (enum het_type)i;
    return HET_TYPE_COUNT;
}

/* ---- fp16 / bf16 -------------------------------------------------------- */

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float het_fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em   = h & 0x7FFF;                    /* exponent and mantissa */
    if (em >= 0x7C00)                              /* inf / nan, payload kept */
        return bits_to_f32(sign | 0x7F800000u | ((em & 0x3FF) << 13));
    if (em >= 0x0400)                              /* normal: rebias 15 -> 127 */
        return bits_to_f32(sign | ((em << 13) + ((127u - 15u) << 23)));
    /* zero or subnormal: em * 2^-24 is exact in binary32 */
    return bits_to_f32(sign | f32_to_bits((float)em * 0x1p-24f));
}

uint16_t het_fp32_to_fp16(float f)
{
    uint32_t x    = f32_to_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t a    = x & 0x7FFFFFFFu;

    if (a > 0x7F800000u)                           /* nan: quiet, keep top payload bits */
        return (uint16_t)(sign | 0x7E00 | ((a >> 13) & 0x3FF));
    if (a >= 0x477FF000u)                          /* >= 65520 rounds to inf (or is inf) */
        return (uint16_t)(sign | 0x7C00);
    if (a < 0x38800000u) {                         /* below 2^-14: half subnormal or zero */
        /* Adding 0.5 puts the binary16 subnormal ulp (2^-24) at the binary32
         * ulp of 0.5, so the FPU rounds to nearest even for us; the low bits
         * are then the half mantissa (0x400 when it rounds up to 2^-14). */
        float r = bits_to_f32(a) + 0.5f;
        return (uint16_t)(sign | (f32_to_bits(r) - 0x3F000000u));
    }
    /* normal: rebias, then round the 13 dropped bits to nearest even */
    uint32_t odd = (a >> 13) & 1;
    a += ((uint32_t)(15 - 127) << 23) + 0xFFF + odd;
    return (uint16_t)(sign | (a >> 13));
}

float het_bf16_to_fp32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

uint16_t het_fp32_to_bf16(float f)
{
    uint32_t x = f32_to_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)           /* nan: truncate and force quiet */
        return (uint16_t)((x >> 16) | 0x0040);
    x += 0x7FFF + ((x >> 16) & 1);                 /* round to nearest even */
    return (uint16_t)(x >> 16);
}
