#version 450
// moe_group.comp — MUL_MAT_ID's grouping pass: one workgroup reads the k*T
// ids (binding 0, byte strides) and writes to binding 3 the token-slot pairs
// grouped by expert and the column tiles mul_mat_id.comp runs over them
// (layout in mul_mat_id_grouped_pc.glsl). Counting and placing use shared
// atomics, so the order of pairs inside an expert's group varies from run to
// run; each output column is computed alone, so results do not. E <= MAX_E
// (host: HET_VK_MOE_MAX_E).
#include "common.glsl"
#include "mul_mat_id_grouped_pc.glsl"

#define MAX_E 1024u

shared uint cnt[MAX_E + 1u];
shared uint at[MAX_E + 1u];

uint expert_of(uint q)
{
    uint s = q % p.k, t = q / p.k;
    uint e = s0.d[(p.i_off + s * p.i_nb0 + t * p.i_nb1) >> 2];
    return min(e, p.E); // negative ids read as large: the bad-id group
}

void main()
{
    uint tid = gl_LocalInvocationID.x, n = p.k * p.T;
    for (uint e = tid; e <= p.E; e += WG) cnt[e] = 0u;
    barrier();
    for (uint q = tid; q < n; q += WG) atomicAdd(cnt[expert_of(q)], 1u);
    barrier();
    if (tid == 0u) {
        uint run = 0u, nt = 0u;
        for (uint e = 0u; e <= p.E; e++) {
            uint c = cnt[e];
            at[e] = run;
            for (uint c0 = 0u; c0 < c; c0 += p.tile) {
                uint w = TILES_AT + 3u * nt;
                sd.d[w] = e;
                sd.d[w + 1u] = run + c0;
                sd.d[w + 2u] = min(p.tile, c - c0);
                nt++;
            }
            run += c;
        }
        sd.d[0] = nt;
    }
    barrier();
    for (uint q = tid; q < n; q += WG) {
        uint j = atomicAdd(at[expert_of(q)], 1u);
        sd.d[p.pairs_at + j] = q;
    }
}
