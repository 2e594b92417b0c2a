// attn.glsl — fused causal attention, one workgroup per (head h, token t,
// batch b; K/V batch b % kv_batch):
// out[:, h, t] = softmax_j(scale * q.k_j) v_j over keys j <= t + n_past
// (and j < n_kv) of kv head h / (n_head / n_kv_head). Keys are taken WG at a
// time (one score per invocation) with an online softmax: running max m,
// running sum l, and the output accumulator rescaled by exp(m_old - m_new).
// q (F32) waits in shared memory; K and V are F16 or F32 with any strides.
// Head size <= 256 (each invocation owns up to 4 output dims; WG >= 64).
#include "subgroup_ext.glsl"
#include "common.glsl"
#include "reduce.glsl"

layout(push_constant) uniform PC {
    uint hd, n_head, n_tok, n_kv, n_kv_head;
    uint n_batch, kv_batch;        // dim 3 of q/dst, and of K/V (1 or n_batch)
    uint q_nb0, q_nb1, q_nb2, q_nb3;
    uint k_nb0, k_nb1, k_nb2, k_nb3;
    uint v_nb0, v_nb1, v_nb2, v_nb3;
    uint d_nb0, d_nb1, d_nb2, d_nb3;
    uint q_off, k_off, v_off, d_off;
    uint types; // bit0 k f16, bit1 v f16
    float scale;
    int n_past;
} p;

shared float q_sh[256];
shared float p_sh[WG];

void main()
{
    uint g = group_id();
    if (g >= p.n_head * p.n_tok * p.n_batch) return;
    uint h = g % p.n_head, t = (g / p.n_head) % p.n_tok, b = g / (p.n_head * p.n_tok);
    uint kvb = b % p.kv_batch;
    uint kvh = h / (p.n_head / p.n_kv_head);
    uint tid = gl_LocalInvocationID.x;
    bool kf16 = (p.types & 1u) != 0u, vf16 = (p.types & 2u) != 0u;
    for (uint d = tid; d < p.hd; d += WG) q_sh[d] = LD_F32(s0, p.q_off + d * p.q_nb0 + h * p.q_nb1 + t * p.q_nb2 + b * p.q_nb3);
    barrier();

    int vis = min(int(p.n_kv), int(t) + p.n_past + 1);
    uint kb = p.k_off + kvh * p.k_nb1 + kvb * p.k_nb3, vb = p.v_off + kvh * p.v_nb1 + kvb * p.v_nb3;
    float m = NEG_BIG, l = 0.0;
    float o[4] = float[4](0.0, 0.0, 0.0, 0.0);
    for (int j0 = 0; j0 < vis; j0 += int(WG)) {
        int j = j0 + int(tid);
        float s = NEG_BIG;
        if (j < vis) {
            uint ko = kb + uint(j) * p.k_nb2;
            float dot = 0.0;
            for (uint d = 0; d < p.hd; d++) dot += q_sh[d] * LD_T(s1, kf16, ko + d * p.k_nb0);
            s = dot * p.scale;
        }
        float mn = max(m, wg_max(s));
        float e = j < vis ? exp(s - mn) : 0.0;
        float alpha = exp(m - mn);
        l = l * alpha + wg_sum(e);
        p_sh[tid] = e;
        barrier();
        uint cnt = uint(min(int(WG), vis - j0));
        [[unroll]] for (uint i = 0; i < 4u; i++) {
            uint d = tid + i * WG;
            if (d >= p.hd) break;
            float acc = o[i] * alpha;
            for (uint jj = 0; jj < cnt; jj++)
                acc += p_sh[jj] * LD_T(s2, vf16, vb + (uint(j0) + jj) * p.v_nb2 + d * p.v_nb0);
            o[i] = acc;
        }
        barrier();
        m = mn;
    }
    [[unroll]] for (uint i = 0; i < 4u; i++) {
        uint d = tid + i * WG;
        if (d >= p.hd) break;
        st_f32(p.d_off + d * p.d_nb0 + h * p.d_nb1 + t * p.d_nb2 + b * p.d_nb3, l > 0.0 ? o[i] / l : 0.0);
    }
}
