#version 450
// mul_mat.comp — tiled matrix multiply for prefill (M > 8). A workgroup of
// 256 computes a 64 (n) x 64 (m) output tile, 4x4 per invocation, stepping
// through K 32 at a time: every invocation dequantises 8 weights of one tile
// row and loads 8 activations into shared memory (rows padded to 33 floats).
// VARIANT = src0 type. The host requires WG == 256.
#include "common.glsl"
#include "quant.glsl"
#include "mul_mat_pc.glsl"

#define TILE 64u
#define BK 32u
#define LDS 33u

shared float a_sh[TILE * LDS];
shared float b_sh[TILE * LDS];

void main()
{
    uint t = gl_LocalInvocationID.x;
    uint n0 = gl_WorkGroupID.x * TILE, m0 = gl_WorkGroupID.y * TILE, z = gl_WorkGroupID.z;
    uint i12 = z % p.B2, i13 = z / p.B2;
    uint rowbase = p.a_off + (i12 / p.r2) * p.a_nb2 + (i13 / p.r3) * p.a_nb3;
    uint xb = p.b_off + i12 * p.b_nb2 + i13 * p.b_nb3;
    uint tx = t & 15u, ty = t >> 4;
    uint lr = t >> 2, lk = (t & 3u) * 8u; // this invocation loads tile row lr, k lk..lk+7
    float acc[4][4];
    [[unroll]] for (uint i = 0; i < 4u; i++)
        [[unroll]] for (uint j = 0; j < 4u; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        float w[8];
        uint n = n0 + lr, m = m0 + lr, k = k0 + lk;
        if (n < p.N && k < p.K) dq8(rowbase + n * p.a_nb1, k, p.K, p.a_nb0, w);
        else [[unroll]] for (uint j = 0; j < 8u; j++) w[j] = 0.0;
        [[unroll]] for (uint j = 0; j < 8u; j++) a_sh[lr * LDS + lk + j] = w[j];
        uint xo = xb + m * p.b_nb1;
        [[unroll]] for (uint j = 0; j < 8u; j++)
            b_sh[lr * LDS + lk + j] = (m < p.M && k + j < p.K) ? LD_F32(s1, xo + (k + j) * p.b_nb0) : 0.0;
        barrier();
        for (uint kk = 0; kk < BK; kk++) {
            float a[4], b[4];
            [[unroll]] for (uint i = 0; i < 4u; i++) a[i] = a_sh[(tx + 16u * i) * LDS + kk];
            [[unroll]] for (uint j = 0; j < 4u; j++) b[j] = b_sh[(ty + 16u * j) * LDS + kk];
            [[unroll]] for (uint i = 0; i < 4u; i++)
                [[unroll]] for (uint j = 0; j < 4u; j++) acc[i][j] += a[i] * b[j];
        }
        barrier();
    }
    uint db = p.d_off + i12 * p.d_nb2 + i13 * p.d_nb3;
    [[unroll]] for (uint i = 0; i < 4u; i++) {
        uint n = n0 + tx + 16u * i;
        if (n >= p.N) continue;
        [[unroll]] for (uint j = 0; j < 4u; j++) {
            uint m = m0 + ty + 16u * j;
            if (m < p.M) st_f32(db + n * p.d_nb0 + m * p.d_nb1, acc[i][j]);
        }
    }
}
