/*
 * moe_routing.c — what the routers of a mixture-of-experts model actually
 * chose, so the planner can cost mul_mat_id with it instead of uniform
 * routing (het/profile.h: het_moe_expected_experts).
 *
 * After a graph has run, each distinct ids tensor of its mul_mat_id nodes
 * (one per MoE layer: "ffn_moe_topk.N") is read and its distinct experts
 * counted. Only ids flagged as outputs are read: the scratch of any other
 * may have been reused by a later node (arch_moe.c flags its routers'). Real routers are skewed: T tokens hit fewer experts than T
 * uniform draws of k would. One observation (T, hit) is summarised as the
 * effective expert count E_eff in [k, E] for which uniform routing expects
 * that many hits, E_eff·(1 - (1 - k/E_eff)^T) = hit; so a prefill of 512
 * tokens also says what a batch of 16 will hit. Per layer (keyed by the ids
 * tensor's name) E_eff is averaged with the earlier ones (half weight each
 * time). A decode token (T = 1) always hits k and says nothing.
 *
 * The generation changes when a layer's E_eff first appears or moves by
 * more than HET_MOE_ROUTING_MARGIN; the scheduler then drops its cached
 * plans, as it does when the profiles' histories move.
 */
#include "sched/sched_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t *tensor_bytes(const struct het_tensor *t)
{
    if (t->data) return t->data;
    if (t->view_src) {
        const uint8_t *b = tensor_bytes(t->view_src);
        return b ? b + t->view_offs : NULL;
    }
    return NULL;
}

/* E_eff in [k, E] with expected(E_eff, k, T) = hit (the expectation grows with E_eff) */
static double effective_experts(double E, double k, double T, double hit)
{
    if (hit >= het_moe_expected_experts(E, k, T)) return E;
    if (hit <= k) return k;
    double lo = k, hi = E;
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        if (het_moe_expected_experts(mid, k, T) < hit) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

static struct het_moe_layer *layer_find(const struct het_moe_routing *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->v[i].name, name)) return &r->v[i];
    return NULL;
}

/* distinct experts in ids (k, T), read through its strides; -1 if any is outside [0, E) */
static int count_hit(const struct het_tensor *ids, int64_t E, uint8_t *seen)
{
    const uint8_t *base = tensor_bytes(ids);
    if (!base) return -1;
    memset(seen, 0, (size_t)E);
    int hit = 0;
    for (int64_t t = 0; t < ids->ne[1]; t++)
        for (int64_t s = 0; s < ids->ne[0]; s++) {
            int32_t e;
            memcpy(&e, base + s * ids->nb[0] + t * ids->nb[1], sizeof e);
            if (e < 0 || e >= E) return -1;
            hit += !seen[e];
            seen[e] = 1;
        }
    return hit;
}

void het_moe_routing_observe(struct het_moe_routing *r, const het_graph *g)
{
    const struct het_tensor *done[64];
    int n_done = 0;
    for (int i = 0; i < het_graph_n_nodes(g); i++) {
        const struct het_tensor *n = het_graph_node(g, i), *ids = n->src[2];
        if (n->op != HET_OP_MUL_MAT_ID || !ids || !ids->name[0] || ids->ne[1] < 2) continue;
        if (!(het_tensor_owner((struct het_tensor *)ids)->flags & (HET_TENSOR_FLAG_OUTPUT | HET_TENSOR_FLAG_INPUT)))
            continue; /* its storage may hold a later node's data by now */
        bool seen_ids = false;
        for (int k = 0; k < n_done && !seen_ids; k++) seen_ids = done[k] == ids;
        if (seen_ids) continue;
        if (n_done < 64) done[n_done++] = ids;
        const int64_t E = n->src[0]->ne[2];
        uint8_t *seen = malloc((size_t)E);
        int hit = seen ? count_hit(ids, E, seen) : -1;
        free(seen);
        if (hit < 0) continue;
        double e_eff = effective_experts((double)E, (double)ids->ne[0], (double)ids->ne[1], hit);
        struct het_moe_layer *L = layer_find(r, ids->name);
        if (!L) {
            if (r->n == r->cap) {
                int cap = r->cap ? 2 * r->cap : 16;
                struct het_moe_layer *v = realloc(r->v, (size_t)cap * sizeof *v);
                if (!v) return; /* observations are an improvement, never required */
                r->v = v;
                r->cap = cap;
            }
            L = &r->v[r->n++];
            memset(L, 0, sizeof *L);
            snprintf(L->name, sizeof L->name, "%s", ids->name);
            L->planned = NAN;
        }
        L->e_eff = L->n_obs ? 0.5 * (L->e_eff + e_eff) : e_eff;
        L->n_obs++;
        L->last_t = (int)ids->ne[1];
        L->last_hit = hit;
        if (!(fabs(L->e_eff / L->planned - 1) <= HET_MOE_ROUTING_MARGIN)) { /* new, or moved */
            L->planned = L->e_eff;
            r->generation++;
        }
    }
}

double het_moe_routing_experts(const struct het_moe_routing *r, const struct het_tensor *node)
{
    const struct het_tensor *ids = node->src[2];
    if (node->op != HET_OP_MUL_MAT_ID || !ids) return NAN;
    const struct het_moe_layer *L = layer_find(r, ids->name);
    if (!L) return NAN;
    return het_moe_expected_experts(L->e_eff, (double)ids->ne[0], (double)ids->ne[1]);
}

void het_moe_routing_free(struct het_moe_routing *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}
