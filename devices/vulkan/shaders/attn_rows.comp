#version 450
// attn_rows.comp — fused causal attention for CPU-type devices (the same
// contract as attn.glsl; see mul_mat_rows.glsl for why these devices get
// their own kernels). A workgroup is one subgroup; each invocation owns one
// query token of head h (q scaled, and the output accumulator, in its
// registers), and the subgroup walks the visible keys KB at a time: every
// K and V row is fetched once, as 16-byte texels spread over the lanes
// (bindings 4 and 5: RGBA32UI views of K's and V's ranges), and reaches all
// lanes by shuffles. Online softmax per block of KB keys (running max m,
// sum l). Dispatch: ceil(n_tok / SG) * n_head * n_batch workgroups
// (group_id()). VARIANT: bits 0-2 = head size / 32 - 1, bit 3 = K and V are
// F16 (else F32). Host-checked: K/V element stride = element size, rows
// and offsets 16-byte aligned, a row's texels a multiple of SG, WG == SG.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"

layout(push_constant) uniform PC {
    uint hd, n_head, n_tok, n_kv, n_kv_head;
    uint n_batch, kv_batch;
    uint q_nb0, q_nb1, q_nb2, q_nb3;
    uint k_nb0, k_nb1, k_nb2, k_nb3;
    uint v_nb0, v_nb1, v_nb2, v_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint q_off, k_off, v_off, d_off;
    uint types;
    float scale;
    int n_past;
} p;

layout(constant_id = 2) const uint SG = 8;
// Always 1: loop bounds times ONE stay rolled in SPIR-V and are unrolled by
// the driver after specialization (see mul_mat_rows.glsl).
layout(constant_id = 3) const uint ONE = 1;

layout(binding = 4) uniform usamplerBuffer k_t;
layout(binding = 5) uniform usamplerBuffer v_t;

const uint HD = ((VARIANT & 7u) + 1u) * 32u * ONE;
const uint F16KV = (VARIANT >> 3) & 1u;       // 1: F16 K/V, 0: F32
const uint EPT = 4u + 4u * F16KV;              // elements per texel
const uint TPL = HD / EPT / SG;                // texels of a row per lane
#define HDMAX 256u
#define TMAX 16u                               // TPL at most (F32, hd 256, SG 4)
#define KB 8u                                  // keys per block

// A K or V row's texels spread over the lanes: lane l holds texels
// l + SG*u of the row starting at texel t0.
void load_k(uint t0, out uvec4 w[TMAX])
{
    [[unroll]] for (uint u = 0; u < TPL; u++) w[u] = texelFetch(k_t, int(t0 + gl_SubgroupInvocationID + SG * u));
}

void load_v(uint t0, out uvec4 w[TMAX])
{
    [[unroll]] for (uint u = 0; u < TPL; u++) w[u] = texelFetch(v_t, int(t0 + gl_SubgroupInvocationID + SG * u));
}

// The row's 32-bit word i, in every lane.
uint word_at(uvec4 w[TMAX], uint i)
{
    uint t = i >> 2;
    return subgroupShuffle(w[t / SG][i & 3u], t % SG);
}

// Elements 2e and 2e+1 of the row.
vec2 pair_at(uvec4 w[TMAX], uint e)
{
    if (F16KV == 1u) return unpackHalf2x16(word_at(w, e));
    return vec2(uintBitsToFloat(word_at(w, 2u * e)), uintBitsToFloat(word_at(w, 2u * e + 1u)));
}

void main()
{
    uint tid = gl_LocalInvocationID.x;
    uint ntb = (p.n_tok + WG - 1u) / WG;
    uint g = group_id();
    if (g >= ntb * p.n_head * p.n_batch) return; // whole workgroup
    uint tb = g % ntb, h = (g / ntb) % p.n_head, b = g / (ntb * p.n_head);
    uint t = tb * WG + tid, tc = min(t, p.n_tok - 1u);
    uint kvh = h / (p.n_head / p.n_kv_head), kvb = b % p.kv_batch;

    float q[HDMAX], o[HDMAX];
    uint qb = p.q_off + h * p.q_nb1 + tc * p.q_nb2 + b * p.q_nb3;
    [[unroll]] for (uint d = 0; d < HD; d++) {
        q[d] = LD_F32(s0, qb + d * p.q_nb0) * p.scale;
        o[d] = 0.0;
    }
    int vis = min(int(p.n_kv), int(tc) + p.n_past + 1);                    // this lane's keys
    uint t_last = min(tb * WG + WG - 1u, p.n_tok - 1u);
    int lim = min(int(p.n_kv), int(t_last) + p.n_past + 1);                 // the workgroup's
    uint kt0 = (p.k_off + kvh * p.k_nb1 + kvb * p.k_nb3) >> 4, ks = p.k_nb2 >> 4; // in texels
    uint vt0 = (p.v_off + kvh * p.v_nb1 + kvb * p.v_nb3) >> 4, vs = p.v_nb2 >> 4;
    float m = NEG_BIG, l = 0.0;
    for (int j0 = 0; j0 < lim; j0 += int(KB)) {
        float s[KB];
        float mb = NEG_BIG;
        [[unroll]] for (uint i = 0; i < KB; i++) s[i] = NEG_BIG;
        [[dont_unroll]] for (uint i = 0; i < KB; i++) {
            uint j = min(uint(j0) + i, p.n_kv - 1u);
            uvec4 w[TMAX];
            load_k(kt0 + j * ks, w);
            float dot[4] = float[4](0.0, 0.0, 0.0, 0.0); // independent chains
            [[unroll]] for (uint e = 0; e < HD / 2u; e++) {
                vec2 kv2 = pair_at(w, e);
                dot[e & 3u] = fma(q[2u * e], kv2.x, dot[e & 3u]);
                dot[e & 3u] = fma(q[2u * e + 1u], kv2.y, dot[e & 3u]);
            }
            float sc = (dot[0] + dot[1]) + (dot[2] + dot[3]);
            sc = j0 + int(i) < vis ? sc : NEG_BIG;
            [[unroll]] for (uint u = 0; u < KB; u++) s[u] = u == i ? sc : s[u]; // a select each, no indexing
            mb = max(mb, sc);
        }
        float mn = max(m, mb), alpha = exp(m - mn), ps = 0.0;
        [[unroll]] for (uint i = 0; i < KB * ONE; i++) {
            s[i] = s[i] > 0.5 * NEG_BIG ? exp(s[i] - mn) : 0.0;
            ps += s[i];
        }
        l = l * alpha + ps;
        [[unroll]] for (uint d = 0; d < HD; d++) o[d] *= alpha;
        [[dont_unroll]] for (uint i = 0; i < KB; i++) {
            uint j = min(uint(j0) + i, p.n_kv - 1u);
            uvec4 w[TMAX];
            load_v(vt0 + j * vs, w);
            float si = s[0];
            [[unroll]] for (uint u = 1; u < KB; u++) si = u == i ? s[u] : si;
            [[unroll]] for (uint e = 0; e < HD / 2u; e++) {
                vec2 v2 = pair_at(w, e);
                o[2u * e] = fma(si, v2.x, o[2u * e]);
                o[2u * e + 1u] = fma(si, v2.y, o[2u * e + 1u]);
            }
        }
        m = mn;
    }
    if (t < p.n_tok) {
        uint db = p.d_off + h * p.d_nb1 + t * p.d_nb2 + b * p.d_nb3;
        [[unroll]] for (uint d = 0; d < HD; d++) st_f32(db + d * p.d_nb0, l > 0.0 ? o[d] / l : 0.0);
    }
}
