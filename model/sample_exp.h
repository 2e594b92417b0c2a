/*
 * sample_exp.h — e^x for the sampler's weights, in plain float arithmetic
 * that compilers vectorise (internal to sample.c; its test uses it too).
 *
 * libm's expf is a call per candidate: over 151,936 candidates it was
 * ~40% of a draw. This is the classic reduction, x = k ln 2 + r with
 * |r| <= ln 2 / 2 (ln 2 in two parts, so k ln 2 is exact), a degree-6
 * polynomial for e^r (Cephes' expf coefficients) and 2^k built in the
 * exponent bits; k is rounded by adding and subtracting 1.5 * 2^23, which
 * needs no rounding instruction. About one ulp from expf for x in
 * [-87, 0], the sampler's range (x is a scaled logit minus the largest);
 * below -87 it gives e^-87, where a weight is far too small to matter. The
 * same operations in a loop and in one call give the same bits, so a
 * sampler that computes weights both ways draws consistently. For x <= 0
 * (and -inf); NaN gives NaN.
 */
#ifndef HET_MODEL_SAMPLE_EXP_H
#define HET_MODEL_SAMPLE_EXP_H

#include <stdint.h>
#include <string.h>

static inline float het_sample_exp(float x)
{
    /* x = max(x, -87) on the bits (a float compare here kept compilers from
     * vectorising): a more negative float has larger bits; -inf too */
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = u > 0xC2AE0000u ? 0xC2AE0000u : u;
    memcpy(&x, &u, sizeof x);
    const float round = 12582912.0f; /* 1.5 * 2^23 */
    const float kf = (x * 1.44269504088896341f + round) - round;
    const float r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
    const float p = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
                     1.6666665459e-1f) * r + 5.0000001201e-1f;
    const float er = p * (r * r) + r + 1.0f;
    const uint32_t bits = (uint32_t)((int32_t)kf + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return er * scale;
}

#endif /* HET_MODEL_SAMPLE_EXP_H */
