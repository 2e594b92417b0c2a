/*
 * cmd_plan.c — `hetrun plan`: show where each node of a model's prefill or
 * decode graph runs and why: per node the device, the predicted µs there
 * and on every other device, hand-offs, pins and fallbacks; a per-layer
 * summary; the whole-graph prediction and the device crossovers. --measure
 * runs the plan and adds measured µs per node (each node its own split) and
 * the measured total beside the predicted one. --profile plans for devices
 * that are not present (simulation) and prints predicted tokens/s.
 * --accuracy runs a text on the CPU alone and with the plan and prints
 * top-1 agreement and KL per position (hr_accuracy.c); --accuracy-budget
 * plans with lossy devices capped, and the scheduler that runs it (for
 * --accuracy and --measure) plans with the same budget and table.
 *
 * The graph comes from a dry run of the context (the scheduler plans but
 * runs nothing), so it is exactly the graph `hetrun run` would execute.
 */
#include "tools/hetrun.h"
#include "tools/hr_accuracy.h"
#include "tools/hr_profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PLAN_FLAGS "-m -p -f -t -c --no-bos --json -v --phase --batch --past --measure --accuracy " \
                   HR_PLACEMENT_FLAGS
#define MAXD        HET_PLAN_MAX_DEVICES

struct planrun {
    struct hr_opts      o;
    struct hr_plan_opts po;
    struct hr_session   s;
    het_sched          *sched;               /* plan's own: all profiles, real pins      */
    het_context        *ctx;                 /* a context of past + batch tokens on it   */
    het_profile        *prof[MAXD];          /* opened devices, then simulated ones      */
    const char         *names[MAXD];
    int                 n_real, n_dev;
    const char         *what_if;             /* --profile names a what-if machine: only its devices are planned on */
    struct het_plan_pin pins[HET_SCHED_MAX_PINS];
    int                 n_pins;
    struct het_plan     plan;                /* the plan printed                          */
    const het_graph    *g;
    bool                prefill;
    int                 n_tok, past;
    double              plan_us;
    const double       *meas;                /* per node, or NULL                         */
    double              meas_total_us;       /* compute time of a normal run (NAN: none)  */
    double              eval_ms;             /* wall time of that eval                    */
    int                 n_meas_runs;         /* evals the median was taken over           */
    double              meas_q1_us, meas_q3_us; /* their quartiles                          */
    bool                want_acc;            /* --accuracy, --accuracy-budget or --sensitivity */
    struct hr_accuracy  acc;
    struct het_plan     sched_plan;          /* what the scheduler planned (budget check)  */
    int                 n_differ;            /* nodes where it differs from r->plan (-1: not compared) */
};

/* ---------------------------------------------------------------------------
 * set-up                                                                    */

static bool make_sched(struct planrun *r)
{
    struct het_sched_params sp = {
        .devices = r->s.devices, .n_devices = r->s.n_devices, .profiles = (const het_profile *const *)r->prof,
        .strict = r->o.strict, .overlap = r->po.overlap, .pool = r->s.pool,
    };
    if (!hr_policy_parse(r->o.policy, r->s.devices, r->s.n_devices, &sp)) return false;
    struct het_plan_pin real[HET_SCHED_MAX_PINS];
    int n = 0;
    for (int i = 0; i < r->n_pins; i++)
        if (r->pins[i].device < r->n_real) real[n++] = r->pins[i];
    sp.pins = real;
    sp.n_pins = n;
    het_error err = { 0 };
    het_sched *s = het_sched_init(&sp, &err);
    if (!s) {
        hr_error(&r->o, "%s", err.msg);
        return false;
    }
    het_sched_free(r->sched);
    r->sched = s;
    return true;
}

static bool new_context(struct planrun *r, het_error *err)
{
    het_context_free(r->ctx);
    struct het_context_params cp = { .n_ctx = r->past + r->n_tok + 8, .sched = r->sched, .pool = r->s.pool };
    r->ctx = het_context_init(r->s.model, &cp, err);
    if (!r->ctx) hr_error(&r->o, "%s", err->msg);
    return r->ctx != NULL;
}

static bool setup(struct planrun *r)
{
    struct hr_opts so = r->o; /* the budget is applied below, to plan's own scheduler */
    so.plan.accuracy_budget = so.plan.sensitivity = NULL;
    r->what_if = hr_profile_what_if(r->po.profile);
    if (r->what_if) so.plan.profile = "default"; /* the devices here only build the graph: no calibration */
    if (!hr_session_open(&r->s, &so, false)) return false;
    r->n_real = r->s.n_devices;
    /* the session's profiles (acquired for this model: measured, cached,
     * or backing off from a refused calibration); one device has none */
    bool have = r->n_real > 0;
    for (int i = 0; i < r->n_real; i++) have &= het_session_profile(r->s.hs, i) != NULL;
    for (int i = 0; have && i < r->n_real; i++)
        if (!(r->prof[i] = het_profile_clone(het_session_profile(r->s.hs, i)))) {
            hr_error(&r->o, "out of memory");
            return false;
        }
    struct het_calibrate_needs needs; /* else a first-use calibration measures what this model needs */
    het_calibrate_needs_of_model(r->s.model, &needs);
    so.plan.needs = &needs;
    if (!have && !hr_profiles_for(r->s.devices, r->n_real, &so.plan, r->prof)) return false;
    r->n_dev = r->n_real + hr_profiles_extra(&r->po, r->s.devices, r->n_real, r->prof + r->n_real, MAXD - r->n_real);
    for (int i = 0; i < r->n_dev; i++) r->names[i] = het_profile_device_name(r->prof[i]);
    if (r->po.measure && r->n_dev > r->n_real) {
        hr_error(&r->o, "--measure cannot run simulated devices (%s is not present)", r->names[r->n_real]);
        return false;
    }
    het_error err = { 0 };
    if (r->po.pin && het_plan_pins_parse(r->po.pin, r->names, r->n_dev, r->pins, HET_SCHED_MAX_PINS, &r->n_pins,
                                         &err) != HET_OK) {
        hr_error(&r->o, "%s", err.msg);
        return false;
    }
    if (!make_sched(r)) return false;
    r->prefill = r->po.phase && !strcmp(r->po.phase, "prefill");
    r->n_tok = r->prefill ? r->po.batch : 1;
    r->past = r->prefill ? 0 : r->po.past;
    r->want_acc = r->po.accuracy || r->po.accuracy_budget || r->po.sensitivity;
    r->n_differ = -1;
    if ((r->po.accuracy || r->po.sensitivity) && r->n_dev > r->n_real) {
        hr_error(&r->o, "--accuracy/--sensitivity run the model: %s is not present (simulated)", r->names[r->n_real]);
        return false;
    }
    if (r->want_acc && !hr_accuracy_open(&r->acc, &r->o, &r->po, r->s.model, r->n_tok)) return false;
    return new_context(r, &err);
}

/* ---------------------------------------------------------------------------
 * planning and measuring                                                    */

static bool eval_phase(struct planrun *r, const int32_t *toks, bool with_past, het_error *err)
{
    het_context_reset(r->ctx);
    if (with_past && r->past > 0 && het_context_eval(r->ctx, toks, r->past, false, err) != HET_OK) return false;
    return het_context_eval(r->ctx, toks + r->past, r->n_tok, false, err) == HET_OK;
}

struct sim_support { const het_sched *sched; int n_real; het_profile *const *prof; };

static bool sim_supports(void *user, int d, const struct het_tensor *node)
{
    const struct sim_support *s = user;
    return d < s->n_real ? het_sched_device_supports(s->sched, d, node) : het_profile_has_model(s->prof[d], node);
}

static bool simulate(struct planrun *r, het_error *err)
{
    struct het_plan_device devs[MAXD];
    for (int i = 0; i < r->n_dev; i++) /* a what-if plan leaves the devices here out */
        devs[i] = (struct het_plan_device){ r->names[i], r->prof[i], r->what_if && i < r->n_real };
    struct sim_support sup = { r->sched, r->n_real, r->prof };
    const struct het_policy *pol = NULL;
    int pol_dev = -1;
    if (het_policy_from_name(r->o.policy, r->names, r->n_dev, &pol, &pol_dev, err) != HET_OK) return false;
    struct het_plan_params pp = {
        .devices = devs, .n_devices = r->n_dev, .supports = sim_supports, .supports_user = &sup,
        .policy = pol, .policy_device = pol_dev, .single_margin = HET_SCHED_SINGLE_MARGIN, .pins = r->pins, .n_pins = r->n_pins, .strict = r->o.strict, .overlap = r->po.overlap,
        .accuracy = r->want_acc ? &r->acc.pa : NULL,
    };
    double t0 = hr_now_ms();
    enum het_status st = het_plan_build(&pp, r->g, &r->plan, err);
    r->plan_us = (hr_now_ms() - t0) * 1e3;
    return st == HET_OK;
}

static double busy_us(const struct planrun *r)
{
    double t = 0;
    for (int i = 0; i < r->n_real; i++) {
        struct het_device_stats ds;
        het_device_get_stats(r->s.devices[i], &ds);
        t += ds.busy_us;
    }
    return t;
}

static int cmp_run(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The measured time of the planned graph: the median of many normal evals.
 * One eval on a shared machine varies by tens of percent, and the machine's
 * memory bandwidth drifts over seconds, so evals are taken for about two
 * seconds (at least 5 prefills or 9 decode steps; at most HR_MEAS_MAX) and
 * the quartiles are kept with the median. Prefill: each from a fresh cache
 * filled to --past, untimed.
 * Decode: windows of up to 9 consecutive steps ending at --past, back to
 * back as a generation runs them; the window is refilled and repeated. */
#define HR_MEAS_MAX 256
static bool measure_normal(struct planrun *r, const int32_t *toks, het_error *err)
{
    double (*runs)[2] = malloc(HR_MEAS_MAX * sizeof *runs); /* busy us, wall ms */
    if (!runs) {
        het_error_set(err, HET_ERR_NOMEM, "plan: out of memory");
        return false;
    }
    bool ok = true;
    int n = 0;
    double spent_ms = 0;
    const int start = r->prefill ? r->past : r->past >= 8 ? r->past - 8 : 0;
    const int window = r->prefill ? 1 : r->past - start + 1;
    while (ok && n < HR_MEAS_MAX && (n < (r->prefill ? 5 : 9) || spent_ms < 2000)) {
        het_context_reset(r->ctx);
        ok = start == 0 || het_context_eval(r->ctx, toks, start, false, err) == HET_OK;
        for (int w = 0; ok && w < window && n < HR_MEAS_MAX; w++) {
            const int32_t *in = toks + (r->prefill ? r->past : start + w);
            double b0 = busy_us(r), t0 = hr_now_ms();
            if (het_context_eval(r->ctx, in, r->n_tok, false, err) != HET_OK) ok = false;
            if (!ok) break;
            runs[n][1] = hr_now_ms() - t0;
            runs[n][0] = busy_us(r) - b0;
            spent_ms += runs[n++][1];
        }
    }
    if (ok) {
        qsort(runs, (size_t)n, sizeof runs[0], cmp_run);
        r->meas_total_us = runs[n / 2][0];
        r->meas_q1_us = runs[n / 4][0];
        r->meas_q3_us = runs[(3 * n) / 4][0];
        r->eval_ms = runs[n / 2][1];
        r->n_meas_runs = n;
    }
    free(runs);
    return ok;
}

static bool measure(struct planrun *r, const int32_t *toks, het_error *err)
{
    het_sched_set_dry_run(r->sched, false);
    if (!eval_phase(r, toks, true, err)) return false; /* warm-up: pages, scratch, pipelines */
    if (!measure_normal(r, toks, err)) return false;
    het_sched_set_measure(r->sched, true);
    bool ok = eval_phase(r, toks, true, err);
    het_sched_set_measure(r->sched, false);
    int n = 0;
    r->meas = het_sched_node_times(r->sched, &n);
    if (n != r->plan.n_nodes) r->meas = NULL;
    return ok;
}

/* nodes where the scheduler's plan and the printed one differ */
static int count_differ(const struct het_plan *a, const struct het_plan *b)
{
    if (a->n_nodes != b->n_nodes) return a->n_nodes > b->n_nodes ? a->n_nodes : b->n_nodes;
    int n = 0;
    for (int i = 0; i < a->n_nodes; i++) n += a->nodes[i].device != b->nodes[i].device;
    return n;
}

static bool run_plan(struct planrun *r, bool with_measure)
{
    const struct het_model_config *c = het_model_get_config(r->s.model);
    int n = r->past + r->n_tok;
    int32_t *toks = malloc((size_t)n * sizeof *toks);
    if (!toks) return false;
    for (int i = 0; i < n; i++) toks[i] = (int32_t)((i * 7919 + 13) % c->n_vocab);
    het_error err = { 0 };
    het_sched_set_dry_run(r->sched, true);
    bool ok = eval_phase(r, toks, true, &err);
    if (ok) {
        struct het_sched_stats st;
        het_sched_get_stats(r->sched, &st);
        r->plan_us = st.last_plan_us;
        r->g = het_sched_last_graph(r->sched);
        ok = het_plan_copy(&r->plan, het_sched_last_plan(r->sched), &err) == HET_OK;
    }
    if (ok && r->want_acc) ok = het_plan_copy(&r->sched_plan, &r->plan, &err) == HET_OK;
    if (ok && (r->n_dev > r->n_real || r->want_acc)) ok = simulate(r, &err);
    if (ok && r->want_acc && r->n_dev == r->n_real) r->n_differ = count_differ(&r->plan, &r->sched_plan);
    r->meas_total_us = r->meas_q1_us = r->meas_q3_us = NAN;
    if (ok && with_measure && r->po.measure) ok = measure(r, toks, &err);
    /* what ran: running the graph showed the scheduler which experts the
     * routers chose, and it re-planned with them (a MoE model) */
    if (ok && with_measure && r->po.measure && r->n_dev == r->n_real && !r->want_acc && het_sched_last_plan(r->sched))
        ok = het_plan_copy(&r->plan, het_sched_last_plan(r->sched), &err) == HET_OK;
    if (!ok) hr_error(&r->o, "%s", err.msg);
    free(toks);
    return ok;
}

/* ---------------------------------------------------------------------------
 * accuracy: the sensitivity table, the budget's pins, the evaluation        */

static struct hr_acc_devices acc_devices(const struct planrun *r)
{
    struct hr_acc_devices d = { r->s.devices, (const het_profile *const *)r->prof, r->n_real, -1, -1, r->sched };
    for (int i = 0; i < r->n_real; i++) {
        bool lossy = het_device_get_caps(r->s.devices[i])->lossy;
        if (lossy && d.lossy < 0) d.lossy = i;
        if (!lossy && d.exact < 0) d.exact = i;
    }
    return d;
}

/* After the first plan: get the sensitivity, give it (and the budget) to
 * the scheduler, plan (and measure) again; evaluate the text. */
static bool run_accuracy(struct planrun *r)
{
    struct hr_acc_devices d = acc_devices(r);
    if (!hr_accuracy_sensitivity(&r->acc, &r->po, r->g, &d)) return false;
    het_sched_set_accuracy(r->sched, &r->acc.pa);
    if (!run_plan(r, true)) return false;
    return !r->po.accuracy || hr_accuracy_eval(&r->acc, r->sched);
}

/* ---------------------------------------------------------------------------
 * printing                                                                  */

static const char *node_label(const struct het_tensor *t, char *buf, size_t size)
{
    if (t->name[0]) snprintf(buf, size, "%s", t->name);
    else snprintf(buf, size, "(%s)", het_op_name(t->op));
    return buf;
}

/* layer of node i: the number of "x.N" residual outputs before it */
static int layer_of(const het_graph *g, int i, int *cursor, int *layer)
{
    for (; *cursor < i; (*cursor)++)
        if (!strncmp(het_graph_node(g, *cursor)->name, "x.", 2)) (*layer)++;
    return *layer;
}

/* What placing node i on device d would cost on entry, beside its own time,
 * with the rest of the plan as it is (as the planner charges it): a split
 * start and the fence from the previous node's device when it differs, and
 * the copies of inputs produced on other devices where memory is not
 * shared. */
static double handoff_into(const struct planrun *r, const struct het_handoff_table *ho, int i, int d)
{
    struct het_profile_device_costs dc = { 0 };
    het_profile_get_device_costs(r->prof[d], &dc);
    int prev = i > 0 ? r->plan.nodes[i - 1].device : -1;
    double e = prev != d ? (isfinite(dc.split_us) ? dc.split_us : 0) + (prev >= 0 ? ho->c[prev][d].fixed_us : 0) : 0;
    struct het_tensor *t = het_graph_node(r->g, i);
    for (int s = 0; s < HET_MAX_SRC; s++) {
        if (!t->src[s]) continue;
        const struct het_tensor *owner = het_tensor_owner(t->src[s]);
        for (int j = i - 1; j >= 0; j--) {
            if (het_tensor_owner(het_graph_node(r->g, j)) != owner) continue;
            int pd = r->plan.nodes[j].device;
            double g = ho->c[pd][d].gbps;
            if (pd != d && g > 0) e += (double)het_nbytes(t->src[s]) / (g * 1e3);
            break;
        }
    }
    return e;
}

/* A mul_mat_id: the experts its prediction assumes and where that count
 * comes from, and per device what entering it there costs. */
static size_t why_experts(const struct planrun *r, int i, char *buf, size_t size)
{
    const struct het_plan_node *pn = &r->plan.nodes[i];
    const struct het_tensor *t = het_graph_node(r->g, i);
    const double E = (double)t->src[0]->ne[2], k = (double)t->ne[1], T = (double)t->ne[2];
    size_t o = (size_t)snprintf(buf, size, "; expects %.1f of %.0f experts read (%.0f tok x top-%.0f, %s)",
                                pn->experts, E, T, k,
                                (pn->flags & HET_PLAN_ROUTED) ? "observed routing" : "uniform routing");
    struct het_plan_device devs[MAXD];
    for (int d = 0; d < r->n_dev; d++) devs[d] = (struct het_plan_device){ r->names[d], r->prof[d], false };
    struct het_handoff_table ho;
    het_handoff_table_from_profiles(&ho, devs, r->n_dev);
    o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; hand-off in:");
    for (int d = 0; d < r->n_dev; d++)
        if (!isnan(pn->alt_us[d]))
            o += (size_t)snprintf(buf + o, size > o ? size - o : 0, " %s +%.1f", r->names[d], handoff_into(r, &ho, i, d));
    return o;
}

static void why(const struct planrun *r, int i, char *buf, size_t size)
{
    const struct het_plan_node *pn = &r->plan.nodes[i];
    size_t o = 0;
    int best = -1;
    for (int d = 0; d < r->n_dev; d++) {
        if (isnan(pn->alt_us[d])) continue;
        if (best < 0 || pn->alt_us[d] < pn->alt_us[best]) best = d;
        o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "%s%s %.1f%s", o ? " | " : "", r->names[d],
                              pn->alt_us[d], d == pn->device ? "*" : "");
    }
    if (het_graph_node(r->g, i)->op == HET_OP_MUL_MAT_ID) /* its cost rests on the experts it reads */
        o += why_experts(r, i, buf + o, size > o ? size - o : 0);
    if (pn->flags & HET_PLAN_FALLBACK)
        o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; fallback: %s cannot run it", r->names[pn->wanted]);
    else if (pn->flags & HET_PLAN_PINNED)
        o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; pinned");
    else if (pn->flags & HET_PLAN_ACCURACY)
        o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; kept on %s: accuracy budget",
                              r->names[pn->device]);
    else if (best >= 0 && best != pn->device)
        o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; stays to avoid hand-offs");
    if (pn->kl > 0) o += (size_t)snprintf(buf + o, size > o ? size - o : 0, "; KL %.1e", pn->kl);
    if (pn->enter_us > 0)
        snprintf(buf + o, size > o ? size - o : 0, "; +%.1f split/hand-off", pn->enter_us);
}

/* What node i's prediction on its device rests on: the calibration's
 * samples, the observations of its bucket, the factor they apply. */
static void rests_on(const struct planrun *r, int i, struct het_history_stat *hs, int *n_samples)
{
    const struct het_plan_node *pn = &r->plan.nodes[i];
    struct het_op_cost oc;
    het_op_cost_of(het_graph_node(r->g, i), &oc);
    const het_profile *p = r->prof[pn->device];
    het_profile_history_of(p, &oc, hs);
    *n_samples = 0;
    if (oc.cls != HET_OPCLASS_NONE) het_profile_samples(p, oc.cls, oc.wtype, n_samples);
}

static void rests_on_text(const struct planrun *r, int i, char *buf, size_t size)
{
    struct het_history_stat hs;
    int ns = 0;
    rests_on(r, i, &hs, &ns);
    size_t o = (size_t)snprintf(buf, size, "%d", ns);
    if (hs.n_obs > 0) o += (size_t)snprintf(buf + o, size > o ? size - o : 0, " | %.1f/%d", hs.observed_us, hs.n_obs);
    if (hs.factor != 1.0)
        snprintf(buf + o, size > o ? size - o : 0, " x%.2g%s", hs.factor, hs.borrowed ? "~" : "");
}

/* What a what-if plan simulates: every figure of its devices, and where the work went. */
static void print_what_if(const struct planrun *r)
{
    printf("what-if %s: %s\n  simulated (unmeasured) figures, from published specifications and the seeds:\n",
           r->what_if, het_profile_what_if_desc(r->what_if));
    for (int d = r->n_real; d < r->n_dev; d++) {
        struct het_profile_device_costs dc;
        het_profile_get_device_costs(r->prof[d], &dc);
        printf("    %-10s roofline %.1f GB/s, %.0f GFLOP/s; split %.0f us, kernel switch %.0f us; %s%s%s\n",
               r->names[d], dc.peak_gbps, dc.peak_gflops, dc.split_us, dc.kernel_switch_us,
               dc.async ? "async" : "synchronous", dc.lossy ? ", lossy" : "",
               dc.shares_cpu_cores ? ", on the CPU's cores" : "");
        printf("               %s\n", het_profile_label(r->prof[d]));
    }
    double us[MAXD] = { 0 };
    int count[MAXD] = { 0 };
    for (int i = 0; i < r->plan.n_nodes; i++) {
        us[r->plan.nodes[i].device] += r->plan.nodes[i].pred_us + r->plan.nodes[i].enter_us;
        count[r->plan.nodes[i].device]++;
    }
    printf("  split:");
    for (int d = r->n_real; d < r->n_dev; d++)
        printf(" %s %d nodes %.0f us%s", r->names[d], count[d], us[d], d + 1 < r->n_dev ? ";" : "\n");
}

static void print_header(const struct planrun *r)
{
    const struct het_model_config *c = het_model_get_config(r->s.model);
    printf("plan: %s (%s, %d layers), %s\n", r->o.model, c->arch_name, c->n_layer,
           r->prefill ? "prefill" : "decode");
    printf("  %d token%s at position %d; policy %s, method %s, planned in %.3f ms; %d nodes, %d splits\n", r->n_tok,
           r->n_tok == 1 ? "" : "s", r->past, r->o.policy ? r->o.policy : "fastest", r->plan.method,
           r->plan_us / 1e3, r->plan.n_nodes, r->plan.n_splits);
    for (int d = 0; d < r->n_dev; d++) {
        if (r->what_if && d < r->n_real) {
            printf("  device %-8s (here; builds the graph, not planned on)\n", r->names[d]);
            continue;
        }
        printf("  device %-8s %s%s\n           %s\n", r->names[d], d >= r->n_real ? "(simulated) " : "",
               het_profile_label(r->prof[d]), het_profile_device_desc(r->prof[d]));
        int nh = het_profile_n_history(r->prof[d]), applied = 0;
        for (int i = 0; i < nh; i++) {
            struct het_history_info hi;
            het_profile_history_at(r->prof[d], i, &hi);
            applied += !isnan(hi.applied) && hi.applied != 1.0;
        }
        if (nh)
            printf("           learned while running: %llu observations in %d shape buckets, %d correcting the fit\n",
                   (unsigned long long)het_profile_n_observations(r->prof[d]), nh, applied);
    }
    if (r->what_if) print_what_if(r);
}

static void print_nodes(const struct planrun *r)
{
    printf("%5s  %-24s %-9s %-5s %-8s %10s %10s %-22s %s\n", "#", "node", "op", "type", "device", "pred us",
           r->meas ? "meas us" : "", "rests on", "why (predicted us per device, * = chosen)");
    for (int i = 0; i < r->plan.n_nodes; i++) {
        const struct het_tensor *t = het_graph_node(r->g, i);
        const struct het_plan_node *pn = &r->plan.nodes[i];
        char name[64], w[768], meas[32] = "", ro[64];
        if (r->meas) snprintf(meas, sizeof meas, "%.1f", r->meas[i]);
        why(r, i, w, sizeof w);
        rests_on_text(r, i, ro, sizeof ro);
        printf("%5d  %-24.24s %-9s %-5s %-8s %9.1f%s %10s %-22s %s\n", i, node_label(t, name, sizeof name),
               het_op_name(t->op), t->src[0] ? het_type_name(t->src[0]->type) : "-", r->names[pn->device],
               pn->pred_us, (pn->flags & HET_PLAN_UNMEASURED) ? "~" : " ", meas, ro, w);
    }
    printf("rests on: calibration samples of the node's model | observed us while running / observations of its\n"
           "          bucket; xF: the learned factor applied to the calibrated prediction (~: from a nearby bucket)\n");
}

static void print_layers(const struct planrun *r)
{
    const struct het_model_config *c = het_model_get_config(r->s.model);
    printf("per layer:\n  %-7s %10s %10s  %s\n", "layer", "pred us", r->meas ? "meas us" : "", "nodes per device");
    int cursor = 0, layer = 0;
    for (int i = 0; i < r->plan.n_nodes;) {
        int l = layer_of(r->g, i, &cursor, &layer), count[MAXD] = { 0 };
        double pred = 0, meas = 0;
        for (; i < r->plan.n_nodes && layer_of(r->g, i, &cursor, &layer) == l; i++) {
            pred += r->plan.nodes[i].pred_us + r->plan.nodes[i].enter_us;
            if (r->meas) meas += r->meas[i];
            count[r->plan.nodes[i].device]++;
        }
        char lbl[16], ms[32] = "";
        if (l < c->n_layer) snprintf(lbl, sizeof lbl, "%d", l);
        else snprintf(lbl, sizeof lbl, "output");
        if (r->meas) snprintf(ms, sizeof ms, "%.1f", meas);
        printf("  %-7s %10.1f %10s  ", lbl, pred, ms);
        for (int d = 0; d < r->n_dev; d++)
            if (count[d]) printf("%s %d  ", r->names[d], count[d]);
        printf("\n");
    }
}

static int model_types(const struct planrun *r, enum het_type *types)
{
    int n = 0;
    for (int i = 0; i < r->plan.n_nodes; i++) {
        const struct het_tensor *t = het_graph_node(r->g, i);
        if (t->op != HET_OP_MUL_MAT) continue;
        bool seen = false;
        for (int k = 0; k < n; k++) seen |= types[k] == t->src[0]->type;
        if (!seen && n < 8) types[n++] = t->src[0]->type;
    }
    return n;
}

static double tokens_per_s(const struct planrun *r, double us) { return us > 0 ? r->n_tok * 1e6 / us : 0; }

static void print_totals(const struct planrun *r)
{
    printf("total: predicted %.1f us (serial %.1f, split starts and hand-offs %.1f) = %.1f tokens/s%s\n",
           r->plan.total_us, r->plan.serial_us, r->plan.handoff_us, tokens_per_s(r, r->plan.total_us),
           r->n_dev > r->n_real ? " (simulated)" : "");
    if (!isnan(r->meas_total_us))
        printf("       measured %.1f us on the devices (%.2f ms eval wall; median of %d evals, quartiles %.1f-%.1f) "
               "= %.1f tokens/s; prediction error %+.1f%%\n",
               r->meas_total_us, r->eval_ms, r->n_meas_runs, r->meas_q1_us, r->meas_q3_us,
               tokens_per_s(r, r->meas_total_us), 100 * (r->plan.total_us / r->meas_total_us - 1));
    if (r->plan.n_fallbacks) printf("       %d fallbacks\n", r->plan.n_fallbacks);
    if (r->n_differ > 0)
        printf("       note: the scheduler places %d node%s differently from this plan\n", r->n_differ,
               r->n_differ == 1 ? "" : "s");
    if (r->plan.n_unmeasured)
        printf("       %d predictions (marked ~) come from unmeasured defaults or NPU cost models, not measurements\n",
               r->plan.n_unmeasured);
    if (r->meas) printf("       measured per node: each node run as its own split and waited for\n");
    enum het_type types[8];
    int nt = model_types(r, types);
    if (r->n_dev > 1 && nt) {
        const struct het_model_config *c = het_model_get_config(r->s.model);
        printf("crossovers (fitted models, %dx%d):\n", c->n_embd, c->n_embd);
        hr_print_crossovers(stdout, (const het_profile *const *)r->prof, r->n_dev, types, nt, c->n_embd, c->n_embd);
    }
}

/* ---------------------------------------------------------------------------
 * JSON                                                                      */

static void json_node(const struct planrun *r, int i)
{
    const struct het_tensor *t = het_graph_node(r->g, i);
    const struct het_plan_node *pn = &r->plan.nodes[i];
    char name[64];
    printf("%s{\"i\":%d,\"name\":", i ? "," : "", i);
    hr_json_str(node_label(t, name, sizeof name));
    printf(",\"op\":\"%s\",\"type\":\"%s\",\"device\":", het_op_name(t->op),
           t->src[0] ? het_type_name(t->src[0]->type) : "-");
    hr_json_str(r->names[pn->device]);
    printf(",\"pred_us\":");
    hr_json_num(pn->pred_us, "%.3f");
    printf(",\"enter_us\":");
    hr_json_num(pn->enter_us, "%.3f");
    printf(",\"measured_us\":");
    hr_json_num(r->meas ? r->meas[i] : NAN, "%.3f");
    struct het_history_stat hs;
    int ns = 0;
    rests_on(r, i, &hs, &ns);
    printf(",\"fit_us\":");
    hr_json_num(hs.fit_us, "%.3f");
    printf(",\"fit_samples\":%d,\"observed_us\":", ns);
    hr_json_num(hs.observed_us, "%.3f");
    printf(",\"n_obs\":%d,\"learned_factor\":", hs.n_obs);
    hr_json_num(hs.factor, "%.4g");
    printf(",\"factor_obs\":%d", hs.n_applied);
    printf(",\"unmeasured\":%s,\"pinned\":%s,\"fallback\":%s,\"accuracy_kept\":%s,\"kl\":",
           (pn->flags & HET_PLAN_UNMEASURED) ? "true" : "false", (pn->flags & HET_PLAN_PINNED) ? "true" : "false",
           (pn->flags & HET_PLAN_FALLBACK) ? "true" : "false", (pn->flags & HET_PLAN_ACCURACY) ? "true" : "false");
    hr_json_num(r->want_acc ? pn->kl : NAN, "%.6g"); /* KL per node is ~1e-6: %.3f printed 0 */
    printf(",\"alt_us\":{");
    for (int d = 0; d < r->n_dev; d++) {
        printf("%s", d ? "," : "");
        hr_json_str(r->names[d]);
        putchar(':');
        hr_json_num(pn->alt_us[d], "%.3f");
    }
    printf("}");
    if (t->op == HET_OP_MUL_MAT_ID) { /* the experts it assumes, and the entry cost per device */
        printf(",\"experts\":");
        hr_json_num(pn->experts, "%.3f");
        printf(",\"routing\":\"%s\",\"handoff_in_us\":{", (pn->flags & HET_PLAN_ROUTED) ? "observed" : "uniform");
        struct het_plan_device devs[MAXD];
        for (int d = 0; d < r->n_dev; d++) devs[d] = (struct het_plan_device){ r->names[d], r->prof[d], false };
        struct het_handoff_table ho;
        het_handoff_table_from_profiles(&ho, devs, r->n_dev);
        for (int d = 0; d < r->n_dev; d++) {
            printf("%s", d ? "," : "");
            hr_json_str(r->names[d]);
            putchar(':');
            hr_json_num(isnan(pn->alt_us[d]) ? NAN : handoff_into(r, &ho, i, d), "%.3f");
        }
        printf("}");
    }
    printf("}");
}

static void print_json(const struct planrun *r)
{
    printf("{\"model\":");
    hr_json_str(r->o.model);
    printf(",\"phase\":\"%s\",\"tokens\":%d,\"past\":%d,\"policy\":", r->prefill ? "prefill" : "decode", r->n_tok,
           r->past);
    hr_json_str(r->o.policy ? r->o.policy : "fastest");
    printf(",\"method\":\"%s\",\"plan_us\":", r->plan.method);
    hr_json_num(r->plan_us, "%.3f");
    printf(",\"what_if\":");
    if (r->what_if) hr_json_str(r->what_if);
    else printf("null");
    printf(",\"devices\":[");
    for (int d = 0; d < r->n_dev; d++) {
        printf("%s{\"name\":", d ? "," : "");
        hr_json_str(r->names[d]);
        printf(",\"simulated\":%s,\"measured_profile\":%s,\"profile\":", d >= r->n_real ? "true" : "false",
               het_profile_is_measured(r->prof[d]) ? "true" : "false");
        hr_json_str(het_profile_label(r->prof[d]));
        printf("}");
    }
    printf("],\"nodes\":[");
    for (int i = 0; i < r->plan.n_nodes; i++) json_node(r, i);
    printf("],\"n_splits\":%d,\"n_fallbacks\":%d,\"n_unmeasured\":%d,\"total_pred_us\":", r->plan.n_splits,
           r->plan.n_fallbacks, r->plan.n_unmeasured);
    hr_json_num(r->plan.total_us, "%.3f");
    printf(",\"serial_pred_us\":");
    hr_json_num(r->plan.serial_us, "%.3f");
    printf(",\"handoff_us\":");
    hr_json_num(r->plan.handoff_us, "%.3f");
    printf(",\"tokens_per_s_pred\":");
    hr_json_num(tokens_per_s(r, r->plan.total_us), "%.3f");
    printf(",\"measured_us\":");
    hr_json_num(r->meas_total_us, "%.3f");
    printf(",\"measured_runs\":%d,\"measured_q1_us\":", r->n_meas_runs);
    hr_json_num(r->meas_q1_us, "%.3f");
    printf(",\"measured_q3_us\":");
    hr_json_num(r->meas_q3_us, "%.3f");
    printf(",\"error\":");
    hr_json_num(isnan(r->meas_total_us) ? NAN : r->plan.total_us / r->meas_total_us - 1, "%.3f");
    if (r->want_acc) {
        printf(",\"scheduler_differs\":%d", r->n_differ);
        hr_accuracy_json(&r->acc, &r->plan);
    }
    printf("}\n");
}

/* ---------------------------------------------------------------------------
 * the command                                                               */

int cmd_plan(int argc, char **argv)
{
    struct planrun *r = calloc(1, sizeof *r);
    if (!r) return 1;
    int rc = 1;
    if (!hr_parse(&r->o, "plan", PLAN_FLAGS, argc, argv)) {
        rc = 2;
        goto done;
    }
    r->po = r->o.plan;
    if (!setup(r) || !run_plan(r, !r->want_acc)) goto done;
    if (r->want_acc && !run_accuracy(r)) goto done;
    if (r->o.json) {
        print_json(r);
    } else {
        print_header(r);
        print_nodes(r);
        print_layers(r);
        print_totals(r);
        if (r->want_acc) hr_accuracy_print(&r->acc, &r->plan);
    }
    rc = 0;
done:
    hr_accuracy_close(&r->acc);
    het_plan_free(&r->sched_plan);
    het_plan_free(&r->plan);
    het_context_free(r->ctx);
    het_sched_free(r->sched);
    hr_session_close(&r->s);
    for (int i = 0; i < MAXD; i++) het_profile_free(r->prof[i]);
    free(r);
    return rc;
}
