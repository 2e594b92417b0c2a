#version 450
// mul_mat_id.comp — MUL_MAT_ID for prefill: one tiled GEMM per expert over
// the token-slot pairs routed to it (grouped by moe_group.comp into binding
// 2), so an expert's weights are read once per 64 pairs instead of once per
// pair. Workgroup (x, y) computes output rows 64x..64x+63 of column tile y;
// tiles past the count the grouping wrote exit at once. The tile loop is
// mul_mat.comp's: 256 invocations, 4x4 outputs each, K stepped 32 at a time
// through shared memory (rows padded to 33 floats). Column c of a tile is
// pair q = s + k*t: input column s % n_b of token t, output (., s, t).
// VARIANT = src0 type. The host requires WG == 256.
#include "common.glsl"
#include "quant.glsl"
#include "mul_mat_id_grouped_pc.glsl"

#define TILE 64u
#define BK 32u
#define LDS 33u

shared float a_sh[TILE * LDS];
shared float b_sh[TILE * LDS];

uint pair_dst(uint q) { return p.d_off + (q % p.k) * p.d_nb1 + (q / p.k) * p.d_nb2; }

void main()
{
    uint y = gl_WorkGroupID.y;
    if (y >= s2.d[0]) return; // whole workgroup
    uint tw = TILES_AT + 3u * y;
    uint e = s2.d[tw], first = p.pairs_at + s2.d[tw + 1u], cnt = s2.d[tw + 2u];
    uint t = gl_LocalInvocationID.x, n0 = gl_WorkGroupID.x * TILE;
    if (e >= p.E) { // ids outside [0, E): NaN, as the GEMV path writes
        for (uint i = t; i < TILE * cnt; i += WG) {
            uint n = n0 + i % TILE;
            if (n < p.N) st_f32(pair_dst(s2.d[first + i / TILE]) + n * p.d_nb0, uintBitsToFloat(0x7FC00000u));
        }
        return;
    }
    uint rowbase = p.a_off + e * p.a_nb2;
    uint tx = t & 15u, ty = t >> 4;
    uint lr = t >> 2, lk = (t & 3u) * 8u; // this invocation loads tile row lr, k lk..lk+7
    bool has_col = lr < cnt;
    uint xo = 0u;
    if (has_col) {
        uint q = s2.d[first + lr];
        xo = p.b_off + ((q % p.k) % p.n_b) * p.b_nb1 + (q / p.k) * p.b_nb2;
    }
    float acc[4][4];
    [[unroll]] for (uint i = 0; i < 4u; i++)
        [[unroll]] for (uint j = 0; j < 4u; j++) acc[i][j] = 0.0;

    for (uint k0 = 0; k0 < p.K; k0 += BK) {
        float w[8];
        uint n = n0 + lr, k = k0 + lk;
        if (n < p.N && k < p.K) dq8(rowbase + n * p.a_nb1, k, p.K, p.a_nb0, w);
        else [[unroll]] for (uint j = 0; j < 8u; j++) w[j] = 0.0;
        [[unroll]] for (uint j = 0; j < 8u; j++) a_sh[lr * LDS + lk + j] = w[j];
        [[unroll]] for (uint j = 0; j < 8u; j++)
            b_sh[lr * LDS + lk + j] = (has_col && k + j < p.K) ? LD_F32(s1, xo + (k + j) * p.b_nb0) : 0.0;
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
    [[unroll]] for (uint j = 0; j < 4u; j++) {
        uint c = ty + 16u * j;
        if (c >= cnt) continue;
        uint db = pair_dst(s2.d[first + c]);
        [[unroll]] for (uint i = 0; i < 4u; i++) {
            uint n = n0 + tx + 16u * i;
            if (n < p.N) st_f32(db + n * p.d_nb0, acc[i][j]);
        }
    }
}
