/*
 * cmd_bench.c — `hetrun bench`: prefill (pp) and decode (tg) tokens/s over
 * repetitions, min/median/max, beside the machine's measured read-bandwidth
 * bound for decode and, on the CPU, a compute bound for prefill from the
 * measured int8 and F32 peaks (het_cpu_measure_peak). Like llama-bench: pp
 * evaluates N tokens in one batch from an empty cache; tg generates N tokens
 * one at a time from an empty cache. A warm-up run is made first and not
 * counted. --depth D (llama-bench's -d) starts every run from a cache that
 * holds D tokens, evaluated in one batch before the run and not timed: how
 * fast a long conversation goes on. The decode bound counts the cache's
 * bytes each token reads beside the weights'. Right after each decode run,
 * beside the bandwidth, the time a cache line takes from one thread to
 * another (handoff.c): where the threads run (one last-level cache, or two
 * core complexes) moves decode as much as memory does.
 *
 * --load N repeats each repetition beside N busy-loop processes (a laptop
 * with a browser, a server running other work): quiet pp, quiet tg, then
 * the loops start, loaded pp, loaded tg, and they stop, so both sets of
 * figures come from the same minutes of the same machine. Context switches
 * per token (getrusage) are printed beside each: how often the device's
 * threads slept (voluntary) or were pushed off a core (involuntary).
 */
#include "tools/gpu_times.h"
#include "tools/hetrun.h"
#include "tools/handoff.h"
#include "tools/membw.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define BENCH_FLAGS "-m -p -n -d -r -t -c --json --stats -v --gpu-times --ops --load --temp --top-k --top-p --min-p " \
    HR_PLACEMENT_FLAGS

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* An empty cache, then the first depth tokens in one batch (not timed): where
 * every run starts. */
static bool start_at_depth(struct hr_session *s, const int32_t *toks, int depth, het_error *err)
{
    het_context_reset(s->ctx);
    return depth <= 0 || het_context_eval(s->ctx, toks, depth, false, err) == HET_OK;
}

/* tokens/s of one pp run (n tokens, one batch, after what start_at_depth left) */
static bool run_pp(struct hr_session *s, const int32_t *toks, int n, double *tps, het_error *err)
{
    double t0 = hr_now_ms();
    if (het_context_eval(s->ctx, toks, n, false, err) != HET_OK) return false;
    *tps = n * 1000.0 / (hr_now_ms() - t0);
    return true;
}

/* Decode runs read memory in passes of this many bytes, one after every
 * HR_PASS_EVERY tokens, or after every token that took HR_PASS_SLOW_MS or
 * more (a large model: a pass is then a few percent of what a token reads,
 * and tg32 of an 8B-shaped file got four passes, too few for a median of
 * reads that range 17-58 GB/s back to back here), off the tokens' clock
 * (see run_tg). */
#define HR_PASS_BYTES   ((size_t)64 << 20)
#define HR_PASS_EVERY   8
#define HR_PASS_SLOW_MS 50.0
#define HR_PASSES_MAX   128

/* median of v[0..n) (reordered); 0 when n is 0 */
static double median_of(double *v, int n)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* tokens/s of one tg run (n tokens, one at a time). With bw, the run also
 * reads HR_PASS_BYTES of a buffer far larger than the last-level cache
 * after every HR_PASS_EVERY tokens (every slow one), by as many threads, and *bw_gbs is the
 * median rate of those reads: the read bandwidth of the same seconds as the
 * tokens (this machine's speed of memory moves within seconds). The median,
 * because reads now and then stall for tens of milliseconds (in one run of
 * four, 8 reads in a row at 1.8-16 GB/s, 4-37 ms each, then 8 at 62-73),
 * and bytes over seconds would let them decide the bound.
 * The passes are not on the tokens' clock; the token after one starts with
 * caches the pass emptied, which counts against the tokens. */
static bool run_tg(struct hr_session *s, const int32_t *toks, int n, struct hr_membw *bw, double *tps,
                   double *bw_gbs, het_error *err)
{
    double ms = 0, rate[HR_PASSES_MAX];
    int n_rate = 0;
    double t0 = hr_now_ms();
    for (int i = 0; i < n; i++) {
        const double t_tok = hr_now_ms();
        if (het_context_eval(s->ctx, &toks[i], 1, false, err) != HET_OK) return false;
        const bool slow = hr_now_ms() - t_tok >= HR_PASS_SLOW_MS;
        if (!bw || ((i + 1) % HR_PASS_EVERY && !slow) || n_rate == HR_PASSES_MAX) continue;
        ms += hr_now_ms() - t0;
        const double r = hr_membw_pass(bw, HR_PASS_BYTES);
        if (r > 0) rate[n_rate++] = r;
        t0 = hr_now_ms();
    }
    ms += hr_now_ms() - t0;
    *tps = n * 1000.0 / ms;
    if (bw_gbs) *bw_gbs = median_of(rate, n_rate);
    return true;
}

struct series {
    double v[1000];
    int    n;
    double min, med, max;
    long   tokens, csw_vol, csw_invol; /* context switches over all runs */
    double probe_ms, run_ms;            /* of the runs' time, online correction's probes */
    long   probes;
};

/* Busy-loop processes for --load; each dies with hetrun (PR_SET_PDEATHSIG). */
struct load { pid_t pid[1024]; int n; };

static bool load_start(struct load *l, int n)
{
    const pid_t parent = getpid();
    l->n = 0;
    for (int i = 0; i < n && i < 1024; i++) {
        pid_t pid = fork();
        if (pid < 0) return false;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(0);
            for (volatile unsigned long spin = 0;; spin++) {}
        }
        l->pid[l->n++] = pid;
    }
    return true;
}

static void load_stop(struct load *l)
{
    for (int i = 0; i < l->n; i++) kill(l->pid[i], SIGKILL);
    for (int i = 0; i < l->n; i++) waitpid(l->pid[i], NULL, 0);
    l->n = 0;
}

/* One pp or tg run into x at depth (toks[0, depth) fill the cache first,
 * off the clock and off the counts), counting this process's context
 * switches (a tg run with bw: the read bandwidth of its seconds into
 * *bw_gbs, run_tg). */
static bool run_one(struct hr_session *s, const int32_t *toks, int depth, int n, bool pp, struct series *x,
                    struct hr_membw *bw, double *bw_gbs, het_error *err)
{
    struct rusage r0, r1;
    struct het_sched_stats st0, st1;
    if (!start_at_depth(s, toks, depth, err)) return false;
    het_sched_get_stats(s->sched, &st0);
    getrusage(RUSAGE_SELF, &r0);
    const int32_t *t = toks + depth;
    if (!(pp ? run_pp(s, t, n, &x->v[x->n], err) : run_tg(s, t, n, bw, &x->v[x->n], bw_gbs, err)))
        return false;
    getrusage(RUSAGE_SELF, &r1);
    het_sched_get_stats(s->sched, &st1);
    x->probe_ms += (st1.probe_us - st0.probe_us) / 1e3;
    x->probes += (long)(st1.n_probes - st0.n_probes);
    x->run_ms += n * 1000.0 / x->v[x->n];
    x->n++;
    x->tokens += n;
    x->csw_vol += r1.ru_nvcsw - r0.ru_nvcsw;
    x->csw_invol += r1.ru_nivcsw - r0.ru_nivcsw;
    return true;
}

/* online correction's share of the timed runs, said rather than hidden */
static void print_probes(const struct series *x)
{
    if (x->probes > 0)
        printf("  of which timing nodes for the cost model: %.1f ms (%.1f%%, %ld probes)", x->probe_ms,
               100.0 * x->probe_ms / x->run_ms, x->probes);
}

static void print_csw(const struct series *x)
{
    printf("  context switches/token: %.2f voluntary, %.2f involuntary", (double)x->csw_vol / (double)x->tokens,
           (double)x->csw_invol / (double)x->tokens);
}

static void summarize(struct series *x)
{
    double tmp[1000];
    memcpy(tmp, x->v, (size_t)x->n * sizeof *tmp);
    x->med = median_of(tmp, x->n); /* sorts tmp */
    x->min = tmp[0];
    x->max = tmp[x->n - 1];
}

/* Experts of weight t one token reads: k of the n_expert slabs of a 3-D
 * expert tensor (ffn_*_exps, ne[2] = n_expert), all of any other weight. */
static double expert_fraction(const struct het_model_config *c, const struct het_tensor *t)
{
    if (c->n_expert > 1 && t->ne[2] == c->n_expert) return (double)c->n_expert_used / (double)c->n_expert;
    return 1.0;
}

/* bytes one decode step reads: every weight except the embedding table,
 * of which only one row is gathered (unless it doubles as the output), and
 * of a mixture of experts only the k experts the token is routed to */
static size_t decode_bytes(const het_model *m)
{
    const struct het_model_config *c = het_model_get_config(m);
    double total = 0;
    for (int i = 0; i < het_model_n_weights(m); i++) {
        const struct het_tensor *t = het_model_weight(m, i);
        if (!c->tied_output && !strcmp(t->name, "token_embd.weight")) continue;
        total += (double)het_nbytes(t) * expert_fraction(c, t);
    }
    return (size_t)total;
}

/* KV-cache bytes one decode token reads, averaged over a tg run of n tokens
 * after depth: token i attends depth + i + 1 positions, each a K and a V
 * row of every kv head of every layer (F16, the context's cache type). */
static size_t decode_kv_bytes(const het_model *m, int depth, int n)
{
    const struct het_model_config *c = het_model_get_config(m);
    const double row = 2.0 * (double)c->n_head_kv * (double)c->head_dim * sizeof(uint16_t);
    return (size_t)(row * c->n_layer * (depth + (n + 1) / 2.0));
}

/* Operations of one prefill token with p tokens in the batch after depth
 * tokens in the cache: the layers' matmuls (2 per weight; quantised ones run
 * on int8 products unless activations stay F32; a 3-D expert tensor counts
 * its k used experts of ne[0] x ne[1] each) and attention's two products
 * over depth + (p+1)/2 keys on average. The output matrix is left out: pp
 * computes the logits of the last token only. */
static void prefill_ops(const het_model *m, int depth, int p, bool f32_act, double *int8_ops, double *f32_ops)
{
    const struct het_model_config *c = het_model_get_config(m);
    *int8_ops = *f32_ops = 0;
    for (int i = 0; i < het_model_n_weights(m); i++) {
        const struct het_tensor *t = het_model_weight(m, i);
        if (strncmp(t->name, "blk.", 4) != 0 || t->ne[1] <= 1) continue; /* norms and biases: vectors */
        double ops = 2.0 * (double)t->ne[0] * (double)t->ne[1] * (double)t->ne[2] * expert_fraction(c, t);
        if (het_type_get_traits(t->type)->is_quantized && !f32_act) *int8_ops += ops;
        else *f32_ops += ops;
    }
    *f32_ops += 4.0 * c->n_layer * c->n_head * c->head_dim * (depth + (p + 1) / 2.0);
}

/* Microseconds het_sampler_sample takes over the last logits (the median of
 * 21 draws, each from the same logits): with run's sampling options, and
 * without top-k (the server's default: top-k 0, top-p 1, temperature 1).
 * Sampling is not part of a tg run, which times graphs, but every token of
 * `hetrun run` and `serve` pays it; it once cost as much as the token. */
static void bench_sampling(const struct hr_opts *o, het_context *ctx, int32_t n_vocab, double *us_run,
                           double *us_server)
{
    int32_t rows = 0;
    const float *logits = het_context_logits(ctx, &rows); /* rows of n_vocab; the last row is the last token's */
    if (logits && rows > 1) logits += (size_t)(rows - 1) * (size_t)n_vocab;
    const struct het_sampler_params run = { .temp = o->temp, .top_k = o->top_k, .top_p = o->top_p,
                                            .min_p = o->min_p, .seed = o->seed },
                                    server = { .temp = 1.0f, .top_p = 1.0f, .seed = o->seed };
    const struct het_sampler_params *which[2] = { &run, &server };
    double *out[2] = { us_run, us_server };
    for (int k = 0; k < 2; k++) {
        *out[k] = 0;
        het_sampler *smp = logits && rows > 0 ? het_sampler_init(which[k], n_vocab) : NULL;
        if (!smp) continue;
        double t[21];
        for (int i = 0; i < 21; i++) {
            const double t0 = hr_now_ms();
            (void)het_sampler_sample(smp, logits);
            t[i] = (hr_now_ms() - t0) * 1e3;
        }
        *out[k] = median_of(t, 21);
        het_sampler_free(smp);
    }
}

/* What every configuration of a run shares. */
struct bench_run {
    struct hr_opts      *o;
    struct hr_session   *s;
    struct hr_gpu_times *gt;
    struct hr_membw     *membw; /* reads between and after decode runs, or NULL */
    const int32_t       *toks;  /* the depth's tokens, then each run's          */
    int                  threads;
    double               open_s; /* opening the session: the model read, every device's
                                    weights prepared (the CPU's panels), any calibration */
};

/* One configuration: a warm-up, o->reps repetitions of a pp run of pp_n
 * tokens and a tg run of tg_n (either 0: none), each from a cache of depth
 * tokens, then its figures: text lines (the model and devices first when
 * header) or one JSON object. */
static bool bench_config(const struct bench_run *b, int pp_n, int tg_n, int depth, bool header)
{
    struct hr_opts *o = b->o;
    struct hr_session *s = b->s;
    const int32_t *toks = b->toks;
    const int threads = b->threads;
    const struct het_model_config *c = het_model_get_config(s->model);
    het_error err = { 0 };
    struct series pp = { .n = 0 }, tg = { .n = 0 }, lpp = { .n = 0 }, ltg = { .n = 0 };
    struct load load = { .n = 0 };
    struct series bws = { .n = 0 }, tg_of_bound = { .n = 0 }; /* best of 5 reads right after each run */
    struct series bwr = { .n = 0 }, tg_of_run = { .n = 0 };   /* reads between each run's tokens */
    struct series hand = { .n = 0 }; /* thread-to-thread hand-off right after each run (handoff.c) */
    double warm;
    /* warm-up: page in the weights, grow scratch, not counted */
    const int32_t *at = toks + depth;
    if ((pp_n > 0 && !(start_at_depth(s, toks, depth, &err) && run_pp(s, at, pp_n, &warm, &err))) ||
        (tg_n > 0 && !(start_at_depth(s, toks, depth, &err) && run_tg(s, at, tg_n < 4 ? tg_n : 4, NULL, &warm, NULL, &err)))) {
        hr_error(o, "%s", err.msg);
        goto fail;
    }
    char lab_pp[16], lab_tg[16];
    char lab_d[24] = "";
    if (depth) snprintf(lab_d, sizeof lab_d, " @ d%d", depth);
    snprintf(lab_pp, sizeof lab_pp, "pp%d%s", pp_n, lab_d);
    snprintf(lab_tg, sizeof lab_tg, "tg%d%s", tg_n, lab_d);
    hr_gpu_times_take(b->gt, NULL); /* warm-up */
    const size_t wdbytes = decode_bytes(s->model), kvbytes = tg_n > 0 ? decode_kv_bytes(s->model, depth, tg_n) : 0;
    const size_t dbytes = wdbytes + kvbytes;
    /* the read bandwidth right after each quiet decode run, and that run
     * against the bound it gives: the speed of memory drifts by minutes */
    /* a device that holds the weights in memory of its own (a discrete GPU)
     * is not bound by the host's read bandwidth: no host bound is printed */
    const char *own = NULL;
    for (int i = 0; i < s->n_devices && !own; i++)
        if (het_device_get_caps(s->devices[i])->own_memory) own = het_device_name(s->devices[i]);
    struct hr_membw *membw = tg_n > 0 && !own ? b->membw : NULL;
    for (int rep = 0; rep < o->reps && rep < 1000; rep++) {
        if (pp_n > 0 && !run_one(s, toks, depth, pp_n, true, &pp, NULL, NULL, &err)) {
            hr_error(o, "%s", err.msg);
            goto fail;
        }
        hr_gpu_times_take(b->gt, lab_pp);
        double bw_run = 0;
        if (tg_n > 0 && !run_one(s, toks, depth, tg_n, false, &tg, membw, &bw_run, &err)) {
            hr_error(o, "%s", err.msg);
            goto fail;
        }
        hr_gpu_times_take(b->gt, lab_tg);
        if (bw_run > 0) {
            bwr.v[bwr.n++] = bw_run;
            tg_of_run.v[tg_of_run.n++] = tg.v[tg.n - 1] * (double)dbytes / (bw_run * 1e9);
        }
        const double bw_now = membw ? hr_membw_measure(membw) : 0;
        if (bw_now > 0) {
            bws.v[bws.n++] = bw_now;
            tg_of_bound.v[tg_of_bound.n++] = tg.v[tg.n - 1] * (double)dbytes / (bw_now * 1e9);
        }
        const double ns = membw && threads > 1 ? hr_handoff_ns() : 0;
        if (ns > 0) hand.v[hand.n++] = ns;
        if (!o->load) continue;
        if (!load_start(&load, o->load)) {
            load_stop(&load);
            hr_error(o, "--load: cannot start %d busy-loop processes", o->load);
            goto fail;
        }
        bool ok = (pp_n <= 0 || run_one(s, toks, depth, pp_n, true, &lpp, NULL, NULL, &err)) &&
                  (tg_n <= 0 || run_one(s, toks, depth, tg_n, false, &ltg, NULL, NULL, &err));
        load_stop(&load);
        if (!ok) { hr_error(o, "%s", err.msg); goto fail; }
        hr_gpu_times_take(b->gt, NULL); /* loaded runs: not in the per-node table */
    }
    double us_sample = 0, us_sample_server = 0;
    if (tg.n) bench_sampling(o, s->ctx, c->n_vocab, &us_sample, &us_sample_server);
    if (pp.n) summarize(&pp);
    if (tg.n) summarize(&tg);
    if (lpp.n) summarize(&lpp);
    if (ltg.n) summarize(&ltg);
    if (bws.n) summarize(&bws);
    if (tg_of_bound.n) summarize(&tg_of_bound);
    if (bwr.n) summarize(&bwr);
    if (hand.n) summarize(&hand);
    const bool hand_tried = membw && threads > 1 && tg.n > 0; /* measured, or found unmeasurable */
    if (tg_of_run.n) summarize(&tg_of_run);
    const double bw = own ? 0 : bws.n ? bws.med : hr_measure_read_bandwidth(threads);
    /* prefill's compute bound: meaningful when the CPU alone runs the graph */
    struct het_cpu_peak peak = { 0 };
    double q_ops = 0, f_ops = 0, pp_bound = 0;
    if (pp.n && s->n_devices == 1 && het_cpu_device_n_threads(s->devices[0]) > 0 &&
        het_cpu_measure_peak(threads, &peak, NULL) == HET_OK) {
        prefill_ops(s->model, depth, pp_n, o->f32_act, &q_ops, &f_ops);
        double t = q_ops / (peak.int8_gops * 1e9) + f_ops / (peak.f32_gflops * 1e9);
        pp_bound = t > 0 ? 1.0 / t : 0;
    }
    size_t wbytes = het_model_weight_bytes(s->model);
    double bound = bw > 0 ? bw * 1e9 / (double)dbytes : 0;
    /* how the CPU's decode runs asked ahead (cpu_stream.c): the hints raced on its own splits */
    struct het_cpu_stream_stats cs = { 0 };
    bool have_cs = false;
    for (int i = 0; i < s->n_devices && !have_cs; i++)
        have_cs = het_cpu_device_stream_stats(s->devices[i], &cs) == HET_OK &&
                  cs.splits_nta + cs.splits_t0 + cs.splits_t1 > 0;
    const char *dev = hr_device_list(o);
    if (o->json) {
        /* paths and device lists as JSON strings (a quote in a file name stays valid JSON) */
        printf("{\"model\":");
        hr_json_str(o->model);
        printf(",\"device\":");
        hr_json_str(dev);
        printf(",\"threads\":%d,\"weight_bytes\":%zu,\"decode_bytes_per_token\":%zu,"
               "\"kv_bytes_per_token\":%zu,\"depth\":%d,\"pp\":%d,\"tg\":%d,\"reps\":%d,"
               "\"pp_tps\":%.2f,\"pp_tps_min\":%.2f,\"pp_tps_max\":%.2f,"
               "\"tg_tps\":%.2f,\"tg_tps_min\":%.2f,\"tg_tps_max\":%.2f,"
               "\"read_bandwidth_gbs\":%.1f,\"tg_bound_tps\":%.1f,"
               "\"peak_int8_gops\":%.1f,\"peak_f32_gflops\":%.1f,\"pp_bound_tps\":%.1f",
               threads, wbytes, wdbytes, kvbytes, depth, pp_n, tg_n, o->reps, pp.med, pp.min, pp.max, tg.med, tg.min,
               tg.max, bw, bound, peak.int8_gops, peak.f32_gflops, pp_bound);
        if (own) {
            printf(",\"tg_bound_note\":");
            char note[160];
            snprintf(note, sizeof note, "%s reads the weights from its own memory: no host bound", own);
            hr_json_str(note);
        }
        printf(",\"open_s\":%.3f", b->open_s);
        /* which hardware: a figure is only comparable on the same processor */
        printf(",\"device_descriptions\":{");
        for (int i = 0; i < s->n_devices; i++) {
            printf(i ? "," : "");
            hr_json_str(het_device_name(s->devices[i]));
            printf(":");
            hr_json_str(het_device_description(s->devices[i]));
        }
        printf("}");
        printf(",\"pp_probe_ms\":%.1f,\"tg_probe_ms\":%.1f", pp.probe_ms, tg.probe_ms);
        if (tg.n) printf(",\"sample_us\":%.1f,\"sample_server_us\":%.1f", us_sample, us_sample_server);
        if (tg_of_bound.n)
            printf(",\"read_bandwidth_gbs_min\":%.1f,\"read_bandwidth_gbs_max\":%.1f,\"tg_of_bound\":%.3f,"
                   "\"tg_of_bound_min\":%.3f,\"tg_of_bound_max\":%.3f",
                   bws.min, bws.max, tg_of_bound.med, tg_of_bound.min, tg_of_bound.max);
        if (tg_of_run.n)
            printf(",\"run_bandwidth_gbs\":%.1f,\"run_bandwidth_gbs_min\":%.1f,\"run_bandwidth_gbs_max\":%.1f,"
                   "\"tg_of_run_bound\":%.3f,\"tg_of_run_bound_min\":%.3f,\"tg_of_run_bound_max\":%.3f",
                   bwr.med, bwr.min, bwr.max, tg_of_run.med, tg_of_run.min, tg_of_run.max);
        if (hand.n)
            printf(",\"handoff_ns\":%.0f,\"handoff_ns_min\":%.0f,\"handoff_ns_max\":%.0f", hand.med, hand.min,
                   hand.max);
        else if (hand_tried) /* the threads never ran at once long enough (a busy machine) */
            printf(",\"handoff_ns\":null,\"handoff_ns_min\":null,\"handoff_ns_max\":null");
        if (have_cs)
            printf(",\"cpu_stream_splits_nta\":%llu,\"cpu_stream_splits_t0\":%llu,\"cpu_stream_splits_t1\":%llu,"
                   "\"cpu_stream_races\":%llu,\"cpu_stream_handoff_ns\":%.0f,\"cpu_stream_fixed\":%s",
                   (unsigned long long)cs.splits_nta, (unsigned long long)cs.splits_t0,
                   (unsigned long long)cs.splits_t1, (unsigned long long)cs.races, cs.handoff_ns,
                   cs.fixed ? "true" : "false");
        if (o->load)
            printf(",\"load\":%d,\"pp_load_tps\":%.2f,\"pp_load_tps_min\":%.2f,\"pp_load_tps_max\":%.2f,"
                   "\"tg_load_tps\":%.2f,\"tg_load_tps_min\":%.2f,\"tg_load_tps_max\":%.2f",
                   o->load, lpp.med, lpp.min, lpp.max, ltg.med, ltg.min, ltg.max);
        printf("}\n");
    } else {
        if (header) {
            printf("model %s: %s, %.1f MiB weights, %d threads, device %s; opened in %.2f s (read, weights "
                   "prepared%s)\n", o->model, c->arch_name, wbytes / 1048576.0, threads, dev, b->open_s,
                   s->n_devices > 1 ? ", calibration if one ran" : "");
            for (int i = 0; i < s->n_devices; i++)
                printf("  %s: %s\n", het_device_name(s->devices[i]), het_device_description(s->devices[i]));
        }
        if (pp.n) {
            printf("%-6s %8.2f tok/s median  (min %.2f, max %.2f, %d runs)", lab_pp, pp.med, pp.min, pp.max, pp.n);
            if (pp_bound > 0)
                printf("   bound: %.1f tok/s = %.3f G int8 ops/token at %.0f GOP/s (%s) + %.3f GFLOP/token at "
                       "%.0f GFLOP/s (%s), measured peaks", pp_bound, q_ops * 1e-9, peak.int8_gops, peak.int8_instr,
                       f_ops * 1e-9, peak.f32_gflops, peak.f32_instr);
            print_probes(&pp);
            if (o->load) print_csw(&pp);
            printf("\n");
        }
        if (tg.n) {
            printf("%-6s %8.2f tok/s median  (min %.2f, max %.2f, %d runs)", lab_tg, tg.med, tg.min, tg.max, tg.n);
            if (own)
                printf("   bound: none here: %s reads the weights (%.1f MB a token) from its own memory, whose "
                       "bandwidth het does not measure", own, wdbytes / 1e6);
            else
                printf("   bound: %.1f tok/s = %.1f GB/s measured read bandwidth / %.1f MB per token (weights %.1f, "
                       "KV cache %.1f)", bound, bw, dbytes / 1e6, wdbytes / 1e6, kvbytes / 1e6);
            if (tg_of_bound.n)
                printf("; each run against the bandwidth measured right after it (best of 5, %.1f-%.1f GB/s): %.0f%% "
                       "(%.0f-%.0f%%)",
                       bws.min, bws.max, 100 * tg_of_bound.med, 100 * tg_of_bound.min, 100 * tg_of_bound.max);
            if (tg_of_run.n)
                printf("; against the reads between its tokens (%.1f-%.1f GB/s): %.0f%% (%.0f-%.0f%%)", bwr.min,
                       bwr.max, 100 * tg_of_run.med, 100 * tg_of_run.min, 100 * tg_of_run.max);
            if (hand.n)
                printf("; a cache line from thread to thread right after it: %.0f ns (%.0f-%.0f)", hand.med,
                       hand.min, hand.max);
            else if (hand_tried)
                printf("; a cache line from thread to thread: not measured (two threads did not run at once for "
                       "100 ms)");
            print_probes(&tg);
            if (o->load) print_csw(&tg);
            printf("\n");
            if (have_cs) {
                printf("stream the CPU's decode splits asked for the weights ahead with T1 in %llu, T0 in %llu, NTA in "
                       "%llu (",
                       (unsigned long long)cs.splits_t1, (unsigned long long)cs.splits_t0,
                       (unsigned long long)cs.splits_nta);
                if (cs.fixed) printf("fixed by HET_CPU_STREAM)\n");
                else if (cs.handoff_ns > 0)
                    printf("the fastest in %llu rounds that raced them; threads %s by their hand-off, last %.0f "
                           "ns, far from %.0f)\n",
                           (unsigned long long)cs.races, cs.handoff_ns >= cs.far_ns ? "far apart" : "near",
                           cs.handoff_ns, cs.far_ns);
                else printf("the fastest in %llu rounds that raced them; the threads' hand-off not measured)\n",
                            (unsigned long long)cs.races);
            }
            printf("sample %8.0f us/token (temp %g, top-k %d, top-p %g over %d tokens: %.1f%% of a %s token); "
                   "the server's default (no top-k, top-p 1, temp 1): %.0f us\n",
                   us_sample, o->temp, o->top_k, o->top_p, c->n_vocab, us_sample * 1e-3 * tg.med / 10.0, lab_tg,
                   us_sample_server);
        }
        const struct series *quiet[2] = { &pp, &tg }, *loaded[2] = { &lpp, &ltg };
        for (int k = 0; k < 2; k++) {
            if (!loaded[k]->n) continue;
            printf("%-6s %8.2f tok/s median  (min %.2f, max %.2f, %d runs) beside %d busy loop%s: %.2fx quiet",
                   k ? lab_tg : lab_pp, loaded[k]->med, loaded[k]->min, loaded[k]->max, loaded[k]->n,
                   o->load, o->load > 1 ? "s" : "", loaded[k]->med / quiet[k]->med);
            print_probes(loaded[k]);
            print_csw(loaded[k]);
            printf("\n");
        }
    }
    load_stop(&load);
    fflush(stdout);
    return true;
fail:
    load_stop(&load);
    return false;
}

int cmd_bench(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "bench", BENCH_FLAGS, argc, argv)) return 2;
    /* tokens: the deepest depth's, then the longest run's */
    const int max_depth = hr_intlist_max(&o.depth_list), max_pp = hr_intlist_max(&o.pp_list),
              max_tg = hr_intlist_max(&o.tg_list), max_run = max_pp > max_tg ? max_pp : max_tg;
    const int n_tok = max_depth + max_run;
    if (o.n_ctx == 0) o.n_ctx = n_tok + 16;
    if (n_tok > o.n_ctx) {
        hr_error(&o, "-d: %d tokens of depth and %d more do not fit the context of %d tokens (-c)", max_depth, max_run,
                 o.n_ctx);
        return 2;
    }
    struct hr_session s;
    struct hr_gpu_times gt = { 0 };
    int rc = 1;
    int32_t *toks = NULL;
    struct hr_membw *membw = NULL;
    const double t_open = hr_now_ms();
    if (!hr_session_open(&s, &o, true)) goto done;
    const double open_s = (hr_now_ms() - t_open) / 1000.0;
    hr_gpu_times_begin(&gt, &s, &o);
    const struct het_model_config *c = het_model_get_config(s.model);
    toks = malloc((size_t)(n_tok > 0 ? n_tok : 1) * sizeof *toks);
    if (!toks) goto done;
    uint64_t r = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n_tok; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        toks[i] = (int32_t)(r % (uint64_t)c->n_vocab);
    }
    int threads = o.threads > 0 ? o.threads : 0; /* the CPU device's, when the set has one */
    for (int i = 0; i < s.n_devices; i++)
        if (het_cpu_device_n_threads(s.devices[i]) > 0) threads = het_cpu_device_n_threads(s.devices[i]);
    if (threads <= 0) threads = (int)sysconf(_SC_NPROCESSORS_ONLN); /* e.g. lavapipe's threads */
    if (threads <= 0) threads = 1;
    if (max_tg > 0) membw = hr_membw_open(threads);
    const struct bench_run b = { .o = &o, .s = &s, .gt = &gt, .membw = membw, .toks = toks, .threads = threads,
                                 .open_s = open_s };
    /* one value each: pp and tg runs side by side in one configuration, as
     * always; a list of any: llama-bench's sweep, every depth with every pp
     * run alone and every tg run alone, a line (or JSON object) each */
    if (o.pp_list.n == 1 && o.tg_list.n == 1 && o.depth_list.n == 1) {
        if (!bench_config(&b, o.pp, o.tg, o.depth, true)) goto done;
    } else {
        bool header = true;
        for (int d = 0; d < o.depth_list.n; d++) {
            for (int i = 0; i < o.pp_list.n; i++) {
                if (o.pp_list.v[i] <= 0) continue;
                if (!bench_config(&b, o.pp_list.v[i], 0, o.depth_list.v[d], header)) goto done;
                header = false;
            }
            for (int i = 0; i < o.tg_list.n; i++) {
                if (o.tg_list.v[i] <= 0) continue;
                if (!bench_config(&b, 0, o.tg_list.v[i], o.depth_list.v[d], header)) goto done;
                header = false;
            }
        }
    }
    if (o.plan.ops) { /* per op class rates beside the device's roofline */
        het_profile *prof[4] = { 0 };
        if (hr_profiles_for(s.devices, s.n_devices, &o.plan, prof))
            for (int i = 0; i < s.n_devices; i++) {
                hr_print_ops(stdout, prof[i]);
                het_profile_free(prof[i]);
            }
    }
    hr_print_stats(&s, &o);
    rc = 0;
done:
    hr_membw_close(membw);
    hr_gpu_times_end(&gt);
    free(toks);
    hr_session_close(&s);
    return rc;
}
