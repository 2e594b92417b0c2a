/*
 * plan.c — the planner (see het/plan.h): node costs per device from the
 * profiles, producer edges (including those through persistent state: a
 * CPY into the KV cache feeds the attention that reads the cache), then
 * placement by policy, dynamic programming or list scheduling, and the
 * exact evaluation of a placement that every method is judged by.
 *
 * With an accuracy budget, a second pass keeps the groups of nodes with
 * the worst time saved per unit of KL off the lossy devices (see plan.h).
 *
 * Pure: reads the graph and the profiles, calls the supports callback,
 * touches no device and no global state.
 */
#include "het/plan.h"

#include "het/accuracy.h"

#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXD      HET_PLAN_MAX_DEVICES
#define MAX_PROD  HET_MAX_SRC
#define REFINES   4     /* DP re-runs with the previous placement of distant producers */

struct prod { int node; double bytes; };

struct ctx {
    const struct het_plan_params *p;
    const struct het_policy *pol;   /* p->policy, or fastest */
    bool             disabled[MAXD];
    const het_graph *g;
    int              n, nd;
    struct het_handoff_table ho;
    double           split_us[MAXD], switch_us[MAXD], per_byte[MAXD][MAXD];
    bool             async[MAXD];
    bool             shares_cpu[MAXD]; /* runs on the CPU's cores: one resource with the CPU */
    double          *cost;      /* n x nd: predicted µs; INFINITY where not allowed */
    uint8_t         *um;        /* n x nd: prediction unmeasured                    */
    struct prod     *prod;      /* n x MAX_PROD                                     */
    uint8_t         *n_prod;
    double          *adj_bytes; /* bytes node i reads from node i-1                 */
    uint32_t        *sig;       /* kernel signature (op, types, shapes)             */
    int16_t         *wanted;
    uint8_t         *flags;
    bool             lossy[MAXD];
    double          *kl;        /* n: KL the node adds on a lossy device            */
    int16_t         *group;     /* n: its sensitivity group, -1 none                 */
    uint8_t         *cand;      /* n: the budget may keep it off the lossy devices   */
};

static double C(const struct ctx *c, int i, int d) { return c->cost[(size_t)i * c->nd + d]; }

/* ---------------------------------------------------------------------------
 * pins                                                                      */

static int find_device(const char *name, const char *const *names, int n)
{
    for (int d = 0; d < n; d++)
        if (!strcmp(names[d], name)) return d;
    for (int d = 0; d < n; d++)
        if (!strncmp(names[d], name, strlen(name))) return d;
    return -1;
}

enum het_status het_plan_pins_parse(const char *spec, const char *const *dev_names, int n_devices,
                                    struct het_plan_pin *out, int max, int *n, het_error *err)
{
    *n = 0;
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
        return het_error_set(err, HET_ERR_INVALID, "--pin: specification too long");
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strrchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return het_error_set(err, HET_ERR_INVALID, "--pin '%s': expected PATTERN=DEVICE", tok);
        *eq = 0;
        if (strlen(tok) >= sizeof out->pattern)
            return het_error_set(err, HET_ERR_INVALID, "--pin '%s': pattern longer than %zu characters", tok,
                                 sizeof out->pattern - 1);
        int d = find_device(eq + 1, dev_names, n_devices);
        if (d < 0) return het_error_set(err, HET_ERR_INVALID, "--pin %s=%s: no such device in the set", tok, eq + 1);
        if (*n >= max) return het_error_set(err, HET_ERR_INVALID, "--pin: more than %d pins", max);
        snprintf(out[*n].pattern, sizeof out[*n].pattern, "%s", tok);
        out[(*n)++].device = d;
    }
    return HET_OK;
}

int het_plan_pin_match(const struct het_plan_pin *pins, int n_pins, const struct het_tensor *node)
{
    for (int i = 0; i < n_pins; i++)
        if (!fnmatch(pins[i].pattern, node->name, 0) || !fnmatch(pins[i].pattern, het_op_name(node->op), 0))
            return i;
    return -1;
}

/* ---------------------------------------------------------------------------
 * hand-off table                                                            */

void het_handoff_table_from_profiles(struct het_handoff_table *t, const struct het_plan_device *devices, int n)
{
    memset(t, 0, sizeof *t);
    for (int a = 0; a < n && a < MAXD; a++)
        for (int b = 0; b < n && b < MAXD; b++) {
            if (a == b) continue;
            struct het_handoff h;
            if (devices[a].profile && het_profile_get_handoff(devices[a].profile, devices[b].name, &h))
                t->c[a][b] = (struct het_handoff_cost){ h.fixed_us, h.gbps };
            else
                t->c[a][b] = (struct het_handoff_cost){ HET_PLAN_DEFAULT_HANDOFF_US, 0 };
        }
}

/* ---------------------------------------------------------------------------
 * graph facts: producers, signatures                                        */

static double dense_bytes(const struct het_tensor *t)
{
    const struct het_type_traits *tr = het_type_get_traits(t->type);
    double bs = tr && tr->blck_size > 0 ? (double)tr->type_size / (double)tr->blck_size : 4.0;
    return (double)het_nelements(t) * bs;
}

/* open-addressing map: storage owner -> last node that wrote it */
struct owner_map { const void **key; int *val; size_t mask; };

static int map_get(const struct owner_map *m, const void *k)
{
    for (size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ull & m->mask;; h = (h + 1) & m->mask) {
        if (!m->key[h]) return -1;
        if (m->key[h] == k) return m->val[h];
    }
}

static void map_put(struct owner_map *m, const void *k, int v)
{
    size_t h = ((uintptr_t)k >> 4) * 0x9E3779B97F4A7C15ull & m->mask;
    while (m->key[h] && m->key[h] != k) h = (h + 1) & m->mask;
    m->key[h] = k;
    m->val[h] = v;
}

static uint32_t signature(const struct het_tensor *t)
{
    uint32_t h = 2166136261u;
    int64_t v[8] = { t->op, t->src[0] ? (int64_t)t->src[0]->type : -1, t->src[0] ? t->src[0]->ne[0] : 0,
                     t->src[0] ? t->src[0]->ne[1] : 0, t->ne[0], t->ne[1], t->ne[2], t->type };
    for (int i = 0; i < 8; i++) h = (h ^ (uint32_t)v[i]) * 16777619u;
    return h;
}

static enum het_status find_producers(struct ctx *c, het_error *err)
{
    size_t cap = 64;
    while (cap < (size_t)c->n * 4) cap *= 2;
    struct owner_map m = { calloc(cap, sizeof *m.key), malloc(cap * sizeof *m.val), cap - 1 };
    if (!m.key || !m.val) {
        free(m.key);
        free(m.val);
        return het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
    }
    for (int i = 0; i < c->n; i++) {
        struct het_tensor *t = het_graph_node(c->g, i);
        struct prod *pr = &c->prod[(size_t)i * MAX_PROD];
        c->n_prod[i] = 0;
        c->adj_bytes[i] = 0;
        for (int s = 0; s < HET_MAX_SRC; s++) {
            if (!t->src[s]) continue;
            int j = map_get(&m, het_tensor_owner(t->src[s]));
            if (j < 0) continue;
            double b = dense_bytes(t->src[s]);
            int k = 0;
            while (k < c->n_prod[i] && pr[k].node != j) k++;
            if (k == c->n_prod[i]) pr[c->n_prod[i]++] = (struct prod){ j, b };
            else if (b > pr[k].bytes) pr[k].bytes = b;
        }
        for (int k = 0; k < c->n_prod[i]; k++)
            if (pr[k].node == i - 1) c->adj_bytes[i] += pr[k].bytes;
        c->sig[i] = signature(t);
        map_put(&m, het_tensor_owner(t), i);
    }
    free(m.key);
    free(m.val);
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * costs and the policy's allowed devices                                    */

static void device_figures(struct ctx *c)
{
    for (int d = 0; d < c->nd; d++) {
        const het_profile *pr = c->p->devices[d].profile;
        struct het_profile_device_costs dc = { 0 };
        if (pr) het_profile_get_device_costs(pr, &dc);
        c->split_us[d] = isfinite(dc.split_us) ? dc.split_us : 0;
        c->switch_us[d] = isfinite(dc.kernel_switch_us) ? dc.kernel_switch_us : 0;
        c->async[d] = dc.async;
        c->shares_cpu[d] = dc.shares_cpu_cores;
        for (int e = 0; e < c->nd; e++) {
            double g = c->ho.c[e][d].gbps;
            c->per_byte[e][d] = e != d && g > 0 ? 1.0 / (g * 1e3) : 0;
        }
    }
}

/* prediction of a node costing oc on device d; *um set when it is not a measurement */
static double predict(const struct ctx *c, int d, const struct het_op_cost *oc, bool *um)
{
    const het_profile *pr = c->p->devices[d].profile;
    *um = true;
    if (!pr) return 0;
    double v = het_profile_predict_cost(pr, oc);
    if (!isnan(v)) {
        *um = !het_profile_is_measured(pr);
        return v;
    }
    v = het_profile_predict_roofline(pr, oc);
    return isnan(v) ? 0 : v;
}

static bool can_run(const struct ctx *c, int d, const struct het_tensor *t)
{
    return !c->p->devices[d].disabled && c->p->supports(c->p->supports_user, d, t);
}

static int first_capable(const struct ctx *c, int i)
{
    for (int d = 0; d < c->nd; d++)
        if (!isnan(C(c, i, d))) return d;
    return -1;
}

/* The device the policy wants for node i (prev: the previous node's device). */
static int policy_wanted(const struct ctx *c, int i, int prev)
{
    struct het_policy_ctx pc = { .n_devices = c->nd, .device = c->pol->takes_device ? c->p->policy_device : -1,
                                 .cost = &c->cost[(size_t)i * c->nd], .disabled = c->disabled, .prev = prev };
    return c->pol->wanted(&pc);
}

/* Costs of every node on every device (NAN: cannot run), and the device the
 * policy or a pin wants (-1: any). */
static enum het_status node_costs(struct ctx *c, struct het_plan *out, het_error *err)
{
    for (int i = 0; i < c->n; i++) {
        struct het_tensor *t = het_graph_node(c->g, i);
        struct het_plan_node *pn = &out->nodes[i];
        memset(pn, 0, sizeof *pn);
        for (int d = 0; d < MAXD; d++) pn->alt_us[d] = NAN;
        bool any = false;
        struct het_op_cost oc;
        double hit = t->op == HET_OP_MUL_MAT_ID && c->p->experts_hit ? c->p->experts_hit(c->p->experts_user, t) : NAN;
        het_op_cost_with_experts(t, hit > 0 ? hit : 0, &oc);
        for (int d = 0; d < c->nd; d++) {
            bool um = false;
            double v = can_run(c, d, t) ? predict(c, d, &oc, &um) : NAN;
            pn->alt_us[d] = v;
            c->cost[(size_t)i * c->nd + d] = v;
            c->um[(size_t)i * c->nd + d] = um;
            any |= !isnan(v);
        }
        if (!any)
            return het_error_set(err, HET_ERR_UNSUPPORTED, "plan: no device supports %s '%s' (%s)",
                                 het_op_name(t->op), t->name, t->src[0] ? het_type_name(t->src[0]->type) : "-");
        int pin = het_plan_pin_match(c->p->pins, c->p->n_pins, t);
        c->flags[i] = (pin >= 0 ? HET_PLAN_PINNED : 0) | (hit > 0 ? HET_PLAN_ROUTED : 0);
        pn->experts = t->op == HET_OP_MUL_MAT_ID ? oc.calls : 0;
        c->wanted[i] = (int16_t)(pin >= 0 ? c->p->pins[pin].device : c->pol->sequential ? -1 : policy_wanted(c, i, -1));
    }
    return HET_OK;
}

static enum het_status fallback(struct ctx *c, int i, int want, het_error *err)
{
    const struct het_tensor *t = het_graph_node(c->g, i);
    c->flags[i] |= HET_PLAN_FALLBACK;
    if (c->p->strict)
        return het_error_set(err, HET_ERR_UNSUPPORTED, "plan: --strict: %s '%s' (%s) cannot run on %s%s",
                             het_op_name(t->op), t->name, t->src[0] ? het_type_name(t->src[0]->type) : "-",
                             c->p->devices[want].name, (c->flags[i] & HET_PLAN_PINNED) ? " (pinned)" : "");
    return HET_OK;
}

/* Restrict each node to its wanted device where it can run there; a node
 * that cannot is a fallback and keeps every device that can run it. */
static enum het_status restrict_to_wanted(struct ctx *c, het_error *err)
{
    for (int i = 0; i < c->n; i++) {
        int w = c->wanted[i];
        if (w < 0) continue;
        if (w >= c->nd || isnan(C(c, i, w))) {
            enum het_status st = fallback(c, i, w < c->nd ? w : 0, err);
            if (st != HET_OK) return st;
            continue;
        }
        for (int d = 0; d < c->nd; d++)
            if (d != w) c->cost[(size_t)i * c->nd + d] = NAN;
    }
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * exact evaluation of a placement (one split after another)                 */

/* Serial µs of assign; fills enter[i] (split start, hand-off, kernel switch). */
static double evaluate(const struct ctx *c, const int *assign, double *enter)
{
    uint32_t last_sig[MAXD] = { 0 };
    bool has_sig[MAXD] = { false };
    double total = 0;
    for (int i = 0; i < c->n; i++) {
        int d = assign[i];
        double e = 0;
        if (i == 0 || assign[i - 1] != d) e += c->split_us[d] + (i ? c->ho.c[assign[i - 1]][d].fixed_us : 0);
        const struct prod *pr = &c->prod[(size_t)i * MAX_PROD];
        for (int k = 0; k < c->n_prod[i]; k++) e += pr[k].bytes * c->per_byte[assign[pr[k].node]][d];
        if (c->switch_us[d] > 0 && (!has_sig[d] || last_sig[d] != c->sig[i])) {
            e += c->switch_us[d];
            last_sig[d] = c->sig[i];
            has_sig[d] = true;
        }
        if (enter) enter[i] = e;
        total += e + C(c, i, d);
    }
    return total;
}

/* ---------------------------------------------------------------------------
 * dynamic programming along the topological order                           */

/* hand-off of node i's distant producers (placed by ref) into device d */
static double distant_cost(const struct ctx *c, const int *ref, int i, int d)
{
    if (!ref) return 0;
    double e = 0;
    const struct prod *pr = &c->prod[(size_t)i * MAX_PROD];
    for (int k = 0; k < c->n_prod[i]; k++)
        if (pr[k].node < i - 1) e += pr[k].bytes * c->per_byte[ref[pr[k].node]][d];
    return e;
}

static double step_cost(const struct ctx *c, int i, int p, int d)
{
    if (p == d) return c->switch_us[d] > 0 && c->sig[i] != c->sig[i - 1] ? c->switch_us[d] : 0;
    return c->split_us[d] + c->switch_us[d] + c->ho.c[p][d].fixed_us + c->adj_bytes[i] * c->per_byte[p][d];
}

/* best[] and back[] are n x nd work arrays; the placement goes to assign */
static void dp_solve(const struct ctx *c, const int *ref, double *best, int8_t *back, int *assign)
{
    int nd = c->nd;
    for (int d = 0; d < nd; d++)
        best[d] = isnan(C(c, 0, d)) ? INFINITY : c->split_us[d] + c->switch_us[d] + C(c, 0, d);
    for (int i = 1; i < c->n; i++) {
        double *row = &best[(size_t)i * nd];
        const double *prev = &best[(size_t)(i - 1) * nd];
        for (int d = 0; d < nd; d++) {
            row[d] = INFINITY;
            back[(size_t)i * nd + d] = -1;
            if (isnan(C(c, i, d))) continue;
            for (int p = 0; p < nd; p++) {
                if (!isfinite(prev[p])) continue;
                double v = prev[p] + step_cost(c, i, p, d);
                if (v < row[d]) {
                    row[d] = v;
                    back[(size_t)i * nd + d] = (int8_t)p;
                }
            }
            row[d] += C(c, i, d) + distant_cost(c, ref, i, d);
        }
    }
    int d = 0;
    const double *last = &best[(size_t)(c->n - 1) * nd];
    for (int k = 1; k < nd; k++)
        if (last[k] < last[d]) d = k;
    for (int i = c->n - 1; i >= 0; i--) {
        assign[i] = d;
        if (i > 0) d = back[(size_t)i * nd + d];
    }
}

/* DP, then re-run with the previous answer placing distant producers, keeping the best. */
static double plan_dp(const struct ctx *c, int *assign, het_error *err)
{
    size_t cells = (size_t)c->n * c->nd;
    double *best = malloc(cells * sizeof *best);
    int8_t *back = malloc(cells);
    int *cand = malloc((size_t)c->n * sizeof *cand);
    if (!best || !back || !cand) {
        free(best); free(back); free(cand);
        het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
        return NAN;
    }
    dp_solve(c, NULL, best, back, assign);
    double best_total = evaluate(c, assign, NULL);
    for (int r = 0; r < REFINES; r++) {
        dp_solve(c, assign, best, back, cand);
        double v = evaluate(c, cand, NULL);
        bool same = !memcmp(cand, assign, (size_t)c->n * sizeof *cand);
        if (v < best_total) {
            best_total = v;
            memcpy(assign, cand, (size_t)c->n * sizeof *cand);
        }
        if (same || !(v < best_total + 1e-9)) break;
    }
    free(best); free(back); free(cand);
    return best_total;
}

/* ---------------------------------------------------------------------------
 * overlap: simulating the executor, and list scheduling on it               */

struct sim {
    double   host;              /* the issuing thread's clock                   */
    double   free[MAXD];        /* when each device finishes what it was given  */
    bool     pending[MAXD];     /* work not yet waited for                      */
    double   cores_free;        /* when the CPU's cores finish what devices that
                                   share them (CPU, lavapipe, emulations) were given */
    int      cur;               /* device of the open split (-1 none)           */
    uint32_t charged;           /* producers' devices already handed off (split) */
    uint32_t last_sig[MAXD];
    bool     has_sig[MAXD];
};

static void sim_init(struct sim *s)
{
    memset(s, 0, sizeof *s);
    s->cur = -1;
}

/* Run node i on d after everything so far; returns its finish time. */
static double sim_step(const struct ctx *c, struct sim *s, const int *assign, int i, int d)
{
    double host = s->host, over = 0;
    if (s->cur != d) {
        s->cur = d;
        s->charged = 0;
        over += c->split_us[d];
    }
    const struct prod *pr = &c->prod[(size_t)i * MAX_PROD];
    for (int k = 0; k < c->n_prod[i]; k++) {
        int q = assign[pr[k].node];
        if (q == d) continue;
        if (s->pending[q]) { /* the executor waits for the producer's device */
            host = fmax(host, s->free[q]);
            s->pending[q] = false;
        }
        if (!(s->charged >> q & 1u)) {
            host += c->ho.c[q][d].fixed_us;
            s->charged |= 1u << q;
        }
        host += pr[k].bytes * c->per_byte[q][d];
    }
    if (c->switch_us[d] > 0 && (!s->has_sig[d] || s->last_sig[d] != c->sig[i])) {
        over += c->switch_us[d];
        s->last_sig[d] = c->sig[i];
        s->has_sig[d] = true;
    }
    double start = fmax(host, s->free[d]);
    if (c->shares_cpu[d]) start = fmax(start, s->cores_free); /* no overlap with the CPU's own work */
    s->free[d] = start + over + C(c, i, d);
    if (c->shares_cpu[d]) s->cores_free = s->free[d];
    if (c->async[d]) {
        s->pending[d] = true;
        s->host = host;
    } else {
        s->host = s->free[d];
    }
    return s->free[d];
}

static double sim_end(const struct ctx *c, const struct sim *s)
{
    double t = s->host;
    for (int d = 0; d < c->nd; d++) t = fmax(t, s->free[d]);
    return t;
}

static double simulate(const struct ctx *c, const int *assign)
{
    struct sim s;
    sim_init(&s);
    for (int i = 0; i < c->n; i++) sim_step(c, &s, assign, i, assign[i]);
    return sim_end(c, &s);
}

/* is (fin, host, cost) of candidate a better than b's? (ties: the host free
 * sooner, so an asynchronous device's work overlaps what the host does next) */
static bool better(double fa, double ha, double ca, double fb, double hb, double cb)
{
    const double eps = 1e-9;
    if (fa < fb - eps) return true;
    if (fa > fb + eps) return false;
    if (ha < hb - eps) return true;
    if (ha > hb + eps) return false;
    return ca < cb - eps;
}

/* HEFT-like: in topological order, each node where it would finish first. */
static void plan_list(const struct ctx *c, int *assign)
{
    struct sim s;
    sim_init(&s);
    for (int i = 0; i < c->n; i++) {
        int best = -1;
        double bf = INFINITY, bh = INFINITY, bc = INFINITY;
        struct sim keep = s;
        for (int d = 0; d < c->nd; d++) {
            if (isnan(C(c, i, d))) continue;
            struct sim t = keep;
            assign[i] = d;
            double fin = sim_step(c, &t, assign, i, d);
            if (best < 0 || better(fin, t.host, C(c, i, d), bf, bh, bc)) {
                best = d;
                bf = fin;
                bh = t.host;
                bc = C(c, i, d);
                s = t;
            }
        }
        assign[i] = best;
    }
}

/* ---------------------------------------------------------------------------
 * sequential policies (alternate): node by node, each after its predecessor */

static enum het_status plan_sequential(struct ctx *c, int *assign, het_error *err)
{
    int cur = -1;
    for (int i = 0; i < c->n; i++) {
        int want = c->wanted[i];
        if (want < 0) {
            want = policy_wanted(c, i, cur);
            if (want < 0 || want >= c->nd) want = first_capable(c, i);
            c->wanted[i] = (int16_t)want;
        }
        int d = want;
        if (isnan(C(c, i, want))) {
            enum het_status st = fallback(c, i, want, err);
            if (st != HET_OK) return st;
            for (d = 0; d < c->nd && (d == want || isnan(C(c, i, d))); d++) {}
            if (d == c->nd) d = first_capable(c, i);
        }
        assign[i] = d;
        cur = d;
    }
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * the plan                                                                  */

static enum het_status reserve(struct het_plan *out, int n, het_error *err)
{
    if (n <= out->cap_nodes) return HET_OK;
    struct het_plan_node *nn = realloc(out->nodes, (size_t)n * sizeof *nn);
    if (nn) out->nodes = nn;
    struct het_plan_split *ns = realloc(out->splits, (size_t)n * sizeof *ns);
    if (ns) out->splits = ns;
    if (!nn || !ns) return het_error_set(err, HET_ERR_NOMEM, "plan: out of memory for %d nodes", n);
    out->cap_nodes = n;
    return HET_OK;
}

static void fill_plan(const struct ctx *c, const int *assign, const double *enter, struct het_plan *out)
{
    out->n_splits = 0;
    out->n_fallbacks = out->n_unmeasured = out->n_kept = 0;
    out->serial_us = out->handoff_us = 0;
    for (int i = 0; i < c->n; i++) {
        struct het_plan_node *pn = &out->nodes[i];
        int d = assign[i];
        pn->device = (int16_t)d;
        pn->wanted = c->wanted[i] >= 0 ? c->wanted[i] : (int16_t)d;
        pn->flags = c->flags[i] | (c->um[(size_t)i * c->nd + d] ? HET_PLAN_UNMEASURED : 0);
        pn->pred_us = pn->alt_us[d];
        pn->enter_us = enter[i];
        pn->kl = c->lossy[d] ? c->kl[i] : 0;
        pn->group = c->group[i];
        out->n_kept += (pn->flags & HET_PLAN_ACCURACY) != 0;
        out->n_fallbacks += (pn->flags & HET_PLAN_FALLBACK) != 0;
        out->n_unmeasured += (pn->flags & HET_PLAN_UNMEASURED) != 0;
        out->serial_us += enter[i] + pn->pred_us;
        out->handoff_us += enter[i];
        if (!out->n_splits || out->splits[out->n_splits - 1].device != d)
            out->splits[out->n_splits++] = (struct het_plan_split){ d, i, 0, 0 };
        struct het_plan_split *sp = &out->splits[out->n_splits - 1];
        sp->n++;
        sp->pred_us += enter[i] + pn->pred_us;
    }
}

static enum het_status ctx_init(struct ctx *c, const struct het_plan_params *p, const het_graph *g, het_error *err)
{
    memset(c, 0, sizeof *c);
    c->p = p;
    c->g = g;
    c->n = het_graph_n_nodes(g);
    c->nd = p->n_devices;
    if (c->nd < 1 || c->nd > MAXD || !p->supports)
        return het_error_set(err, HET_ERR_INVALID, "plan: need 1..%d devices and a supports callback", MAXD);
    c->pol = p->policy ? p->policy : &het_policy_fastest;
    if (c->pol->takes_device && (p->policy_device < 0 || p->policy_device >= c->nd))
        return het_error_set(err, HET_ERR_INVALID, "plan: policy %s names device %d of %d", c->pol->name,
                             p->policy_device, c->nd);
    for (int d = 0; d < c->nd; d++) c->disabled[d] = p->devices[d].disabled;
    if (p->handoffs) c->ho = *p->handoffs;
    else het_handoff_table_from_profiles(&c->ho, p->devices, c->nd);
    device_figures(c);
    size_t n = (size_t)(c->n ? c->n : 1), cells = n * (size_t)c->nd;
    c->cost = malloc(cells * sizeof *c->cost);
    c->um = malloc(cells);
    c->prod = malloc(n * MAX_PROD * sizeof *c->prod);
    c->n_prod = malloc(n);
    c->adj_bytes = malloc(n * sizeof *c->adj_bytes);
    c->sig = malloc(n * sizeof *c->sig);
    c->wanted = malloc(n * sizeof *c->wanted);
    c->flags = malloc(n);
    c->kl = calloc(n, sizeof *c->kl);
    c->group = malloc(n * sizeof *c->group);
    c->cand = calloc(n, 1);
    if (!c->cost || !c->um || !c->prod || !c->n_prod || !c->adj_bytes || !c->sig || !c->wanted || !c->flags ||
        !c->kl || !c->group || !c->cand)
        return het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
    for (size_t i = 0; i < n; i++) c->group[i] = -1;
    for (int d = 0; d < c->nd; d++) c->lossy[d] = het_plan_device_lossy(p, d);
    return HET_OK;
}

static void ctx_free(struct ctx *c)
{
    free(c->cost); free(c->um); free(c->prod); free(c->n_prod);
    free(c->adj_bytes); free(c->sig); free(c->wanted); free(c->flags);
    free(c->kl); free(c->group); free(c->cand);
}

static double plan_total(const struct ctx *c, const int *assign)
{
    return c->p->overlap && c->nd > 1 ? simulate(c, assign) : evaluate(c, assign, NULL);
}

/* A placement that mixes devices must beat the best one-device placement
 * (each node on d where d can run it and nothing wants another device) by
 * params->single_margin, else that one is taken: a mixed plan predicted a
 * little faster is, within the predictions' error, as likely slower.
 * alt: n work entries. True when it replaced assign. */
static bool prefer_one_device(const struct ctx *c, int *assign, int *alt)
{
    const double mixed = plan_total(c, assign);
    double best = INFINITY;
    int best_d = -1;
    for (int d = 0; d < c->nd; d++) {
        bool differs = false;
        for (int i = 0; i < c->n; i++) {
            alt[i] = isnan(C(c, i, d)) ? assign[i] : d;
            differs |= alt[i] != assign[i];
        }
        double v = differs ? plan_total(c, alt) : INFINITY;
        if (v < best) {
            best = v;
            best_d = d;
        }
    }
    if (best_d < 0 || !(best <= mixed * (1 + c->p->single_margin))) return false;
    for (int i = 0; i < c->n; i++) assign[i] = isnan(C(c, i, best_d)) ? assign[i] : best_d;
    return true;
}

static enum het_status place_once(struct ctx *c, struct het_plan *out, int *assign, het_error *err)
{
    if (c->pol->sequential) {
        out->method = c->pol->name;
        return plan_sequential(c, assign, err);
    }
    enum het_status st = restrict_to_wanted(c, err);
    if (st != HET_OK) return st;
    out->method = "dp";
    if (isnan(plan_dp(c, assign, err))) return HET_ERR_NOMEM;
    if (c->nd < 2 || (!c->p->overlap && !(c->p->single_margin > 0))) return HET_OK;
    int *alt = malloc((size_t)c->n * sizeof *alt);
    if (!alt) return het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
    if (c->p->overlap) {
        plan_list(c, alt);
        if (simulate(c, alt) < simulate(c, assign) - 1e-9) {
            memcpy(assign, alt, (size_t)c->n * sizeof *alt);
            out->method = "list";
        }
    }
    if (c->p->single_margin > 0 && prefer_one_device(c, assign, alt)) out->method = "one device";
    free(alt);
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * accuracy budget                                                           */

bool het_plan_device_lossy(const struct het_plan_params *params, int d)
{
    const het_profile *p = params->devices[d].profile;
    struct het_profile_device_costs dc = { 0 };
    if (p) het_profile_get_device_costs(p, &dc);
    return (d < 32 && (params->lossy_mask >> d & 1u)) || dc.lossy;
}

static bool capable(const struct ctx *c, int i, bool lossy)
{
    for (int d = 0; d < c->nd; d++)
        if (c->lossy[d] == lossy && !isnan(C(c, i, d))) return true;
    return false;
}

static bool group_match(const char *pattern, const struct het_tensor *t)
{
    return !fnmatch(pattern, t->name, 0) || !fnmatch(pattern, het_op_name(t->op), 0);
}

/* Each node a lossy device can run: its group and KL (the group's KL shared
 * equally by the group's nodes; the default estimate without a group), and
 * whether the budget may move it (not pinned, no explicit single device,
 * and some exact device can run it). */
static void node_kl(struct ctx *c)
{
    const struct het_plan_accuracy *a = c->p->accuracy;
    const struct het_sensitivity *s = a->sens;
    const int ng = s ? s->n_groups : 0;
    const double dflt = a->node_kl > 0 ? a->node_kl : HET_PLAN_DEFAULT_NODE_KL;
    const bool explicit_lossy = c->pol->takes_device && c->lossy[c->p->policy_device]; /* asked for by name */
    int count[HET_SENSITIVITY_MAX] = { 0 };
    for (int i = 0; i < c->n; i++) {
        c->group[i] = -1;
        c->kl[i] = 0;
        c->cand[i] = 0;
        if (!capable(c, i, true)) continue;
        const struct het_tensor *t = het_graph_node(c->g, i);
        for (int k = 0; k < ng && c->group[i] < 0; k++)
            if (group_match(s->groups[k].pattern, t)) {
                c->group[i] = (int16_t)k;
                count[k]++;
            }
        c->cand[i] = !(c->flags[i] & HET_PLAN_PINNED) && c->pol->honours_budget && !explicit_lossy &&
                     capable(c, i, false);
    }
    for (int i = 0; i < c->n; i++)
        if (capable(c, i, true)) c->kl[i] = c->group[i] >= 0 ? s->groups[c->group[i]].kl / count[c->group[i]] : dflt;
}

static bool budget_active(const struct ctx *c)
{
    const struct het_plan_accuracy *a = c->p->accuracy;
    if (!a || !(a->budget_kl >= 0) || !c->pol->honours_budget) return false;
    for (int d = 0; d < c->nd; d++)
        if (c->lossy[d]) return true;
    return false;
}

struct kl_group { double kl, saved; int id; };

static int by_ratio(const void *pa, const void *pb)
{
    const struct kl_group *a = pa, *b = pb;
    double ra = a->saved / a->kl, rb = b->saved / b->kl;
    if (ra != rb) return ra > rb ? -1 : 1;
    return a->id - b->id;
}

/* a node's KL as the budget counts it: never free, so a budget of 0 keeps
 * every movable node off the lossy devices */
static double budget_kl_of(const struct ctx *c, int i) { return c->kl[i] > 1e-12 ? c->kl[i] : 1e-12; }

/* Given the free placement, which movable nodes must stay off the lossy
 * devices: move[i] = 1 (kept off, flagged) for the nodes of groups the
 * budget cannot afford, 2 for movable nodes the free plan did not put on a
 * lossy device (kept off so that the second pass cannot add KL). Groups
 * (a sensitivity group, or a node no group matches) are afforded in order
 * of time saved per unit of KL while they fit. False: within budget. */
static bool budget_select(const struct ctx *c, const int *assign, const double *cost0, uint8_t *move)
{
    const int ng = c->p->accuracy->sens ? c->p->accuracy->sens->n_groups : 0, n_ids = ng + c->n;
    struct kl_group *grp = calloc((size_t)n_ids, sizeof *grp);
    int *slot = malloc((size_t)n_ids * sizeof *slot);     /* group id -> index in grp, -1 */
    uint8_t *afford = calloc((size_t)n_ids, 1);            /* by group id                  */
    if (!grp || !slot || !afford) { /* out of memory: keep every movable node off (the safe side) */
        for (int i = 0; i < c->n; i++) move[i] = c->cand[i];
        free(grp); free(slot); free(afford);
        return true;
    }
    for (int k = 0; k < n_ids; k++) slot[k] = -1;
    double fixed = 0, total = 0;
    int n_grp = 0;
    for (int i = 0; i < c->n; i++) {
        const int d = assign[i];
        if (!c->lossy[d]) continue;
        total += budget_kl_of(c, i);
        if (!c->cand[i]) {
            fixed += budget_kl_of(c, i);
            continue;
        }
        const int id = c->group[i] >= 0 ? c->group[i] : ng + i;
        if (slot[id] < 0) {
            slot[id] = n_grp;
            grp[n_grp++] = (struct kl_group){ 0, 0, id };
        }
        double exact = INFINITY;
        for (int e = 0; e < c->nd; e++)
            if (!c->lossy[e] && !isnan(cost0[(size_t)i * c->nd + e])) exact = fmin(exact, cost0[(size_t)i * c->nd + e]);
        grp[slot[id]].kl += budget_kl_of(c, i);
        grp[slot[id]].saved += exact - cost0[(size_t)i * c->nd + d];
    }
    const double budget = c->p->accuracy->budget_kl;
    const bool over = total > budget * (1 + 1e-9);
    if (over) {
        qsort(grp, (size_t)n_grp, sizeof *grp, by_ratio);
        double left = budget - fixed;
        for (int k = 0; k < n_grp; k++)
            if (grp[k].kl <= left * (1 + 1e-9)) {
                afford[grp[k].id] = 1;
                left -= grp[k].kl;
            }
        for (int i = 0; i < c->n; i++) {
            const int id = c->group[i] >= 0 ? c->group[i] : ng + i;
            move[i] = !c->cand[i] ? 0 : !c->lossy[assign[i]] ? 2 : afford[id] ? 0 : 1;
        }
    }
    free(grp);
    free(slot);
    free(afford);
    return over;
}

/* Plan; with a budget, plan freely first, then again with the groups the
 * budget cannot afford kept off the lossy devices. */
static enum het_status place(struct ctx *c, struct het_plan *out, int *assign, het_error *err)
{
    if (!budget_active(c)) return place_once(c, out, assign, err);
    const size_t cells = (size_t)c->n * c->nd;
    double *cost0 = malloc(cells * sizeof *cost0);
    uint8_t *flags0 = malloc((size_t)c->n), *move = calloc((size_t)c->n, 1);
    int16_t *wanted0 = malloc((size_t)c->n * sizeof *wanted0);
    enum het_status st = HET_OK;
    if (!cost0 || !flags0 || !move || !wanted0) st = het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
    if (st == HET_OK) {
        memcpy(cost0, c->cost, cells * sizeof *cost0);
        memcpy(flags0, c->flags, (size_t)c->n);
        memcpy(wanted0, c->wanted, (size_t)c->n * sizeof *wanted0);
        st = place_once(c, out, assign, err);
    }
    if (st == HET_OK && budget_select(c, assign, cost0, move)) {
        memcpy(c->cost, cost0, cells * sizeof *cost0);
        memcpy(c->flags, flags0, (size_t)c->n);
        memcpy(c->wanted, wanted0, (size_t)c->n * sizeof *wanted0);
        for (int i = 0; i < c->n; i++) {
            if (!move[i]) continue;
            for (int d = 0; d < c->nd; d++)
                if (c->lossy[d]) c->cost[(size_t)i * c->nd + d] = NAN;
            if (move[i] == 1) c->flags[i] |= HET_PLAN_ACCURACY;
            if (c->wanted[i] >= 0 && c->lossy[c->wanted[i]]) c->wanted[i] = (int16_t)first_capable(c, i);
        }
        st = place_once(c, out, assign, err);
    }
    free(cost0); free(flags0); free(move); free(wanted0);
    return st;
}

static void accuracy_totals(const struct ctx *c, struct het_plan *out)
{
    const struct het_plan_accuracy *a = c->p->accuracy;
    out->pred_kl = NAN;
    out->budget_kl = a && a->budget_kl >= 0 ? a->budget_kl : NAN;
    if (!a) return;
    out->pred_kl = 0;
    for (int i = 0; i < out->n_nodes; i++) out->pred_kl += out->nodes[i].kl;
}

enum het_status het_plan_build(const struct het_plan_params *p, const het_graph *g, struct het_plan *out,
                               het_error *err)
{
    struct ctx c;
    int *assign = NULL;
    double *enter = NULL;
    enum het_status st = ctx_init(&c, p, g, err);
    if (st == HET_OK) st = reserve(out, c.n, err);
    if (st == HET_OK) {
        out->n_nodes = c.n;
        out->n_devices = c.nd;
        assign = malloc((size_t)(c.n ? c.n : 1) * sizeof *assign);
        enter = malloc((size_t)(c.n ? c.n : 1) * sizeof *enter);
        if (!assign || !enter) st = het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
    }
    if (st == HET_OK) st = find_producers(&c, err);
    if (st == HET_OK) st = node_costs(&c, out, err);
    if (st == HET_OK && p->accuracy) node_kl(&c);
    if (st == HET_OK && c.n > 0) st = place(&c, out, assign, err);
    if (st == HET_OK) {
        evaluate(&c, assign, enter);
        fill_plan(&c, assign, enter, out);
        accuracy_totals(&c, out);
        out->total_us = p->overlap && c.nd > 1 && c.n > 0 ? simulate(&c, assign) : out->serial_us;
    }
    free(assign);
    free(enter);
    ctx_free(&c);
    return st;
}

void het_plan_free(struct het_plan *plan)
{
    if (!plan) return;
    free(plan->nodes);
    free(plan->splits);
    memset(plan, 0, sizeof *plan);
}

enum het_status het_plan_copy(struct het_plan *dst, const struct het_plan *src, het_error *err)
{
    enum het_status st = reserve(dst, src->n_nodes > 0 ? src->n_nodes : 1, err);
    if (st != HET_OK) return st;
    int cap = dst->cap_nodes;
    struct het_plan_node *nodes = dst->nodes;
    struct het_plan_split *splits = dst->splits;
    *dst = *src;
    dst->cap_nodes = cap;
    dst->nodes = nodes;
    dst->splits = splits;
    memcpy(nodes, src->nodes, (size_t)src->n_nodes * sizeof *nodes);
    memcpy(splits, src->splits, (size_t)src->n_splits * sizeof *splits);
    return HET_OK;
}

/* ---------------------------------------------------------------------------
 * crossover between two devices' fitted models                              */

static double mm_time(const het_profile *p, enum het_type wt, int64_t n, int64_t k, double m, double extra)
{
    const struct het_type_traits *tr = het_type_get_traits(wt);
    double bpe = tr && tr->blck_size ? (double)tr->type_size / (double)tr->blck_size : 4;
    struct het_op_cost c = { .cls = HET_OPCLASS_MATMUL, .wtype = wt, .m = m, .flops = 2.0 * (double)n * (double)k * m,
                             .bytes = (double)n * (double)k * bpe + (double)(k + n) * m * 4.0 };
    return het_profile_predict_cost(p, &c) + extra;
}

double het_plan_crossover(const het_profile *a, const het_profile *b, enum het_type wt, int64_t n, int64_t k,
                          double handoff_us, double *flops)
{
    if (isnan(mm_time(a, wt, n, k, 1, 0)) || isnan(mm_time(b, wt, n, k, 1, 0))) return NAN;
    double lo = 1, hi = 1;
    while (hi <= 65536 && !(mm_time(b, wt, n, k, hi, handoff_us) < mm_time(a, wt, n, k, hi, 0))) {
        lo = hi;
        hi *= 2;
    }
    if (hi > 65536) return NAN;
    if (hi == 1) {
        if (flops) *flops = 2.0 * (double)n * (double)k;
        return 0;
    }
    while (hi - lo > 1) { /* smallest M in (lo, hi] where b wins */
        double mid = floor((lo + hi) / 2);
        if (mm_time(b, wt, n, k, mid, handoff_us) < mm_time(a, wt, n, k, mid, 0)) hi = mid;
        else lo = mid;
    }
    if (flops) *flops = 2.0 * (double)n * (double)k * hi;
    return hi;
}
