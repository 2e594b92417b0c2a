/*
 * metrics.c — Prometheus text exposition (version 0.0.4) of the server's
 * counters: requests by route and outcome, tokens in and out, queue depth
 * and active sequences, batching (sequences per step), per-device busy
 * time, fallbacks, connections, and histograms of time to first token and
 * per-request decode speed.
 */
#include "serve/metrics.h"

#include <string.h>

static const double ttft_bounds[HET_METRICS_BUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
};
static const double tps_bounds[HET_METRICS_BUCKETS] = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000,
};

void het_metrics_init(struct het_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void het_metrics_free(struct het_metrics *m)
{
    pthread_mutex_destroy(&m->mu);
}

static void observe(struct het_histogram *h, const double *bounds, double v)
{
    int i = 0;
    while (i < HET_METRICS_BUCKETS && v > bounds[i]) i++;
    if (i < HET_METRICS_BUCKETS) h->counts[i]++;
    h->total++;
    h->sum += v;
}

void het_metrics_request(struct het_metrics *m, int route, const struct het_job_info *info)
{
    if (route < 0 || route > 1) return;
    pthread_mutex_lock(&m->mu);
    struct het_route_metrics *r = &m->route[route];
    r->by_finish[info->finish]++;
    r->prompt_tokens += (uint64_t)info->n_prompt;
    r->completion_tokens += (uint64_t)info->n_gen;
    if (info->ttft_ms > 0) observe(&r->ttft, ttft_bounds, info->ttft_ms / 1000.0);
    if (info->n_gen > 1 && info->decode_ms > 0)
        observe(&r->tps, tps_bounds, (info->n_gen - 1) * 1000.0 / info->decode_ms);
    pthread_mutex_unlock(&m->mu);
}

void het_metrics_http(struct het_metrics *m, unsigned code)
{
    if (code >= 600) return;
    pthread_mutex_lock(&m->mu);
    m->http[code]++;
    pthread_mutex_unlock(&m->mu);
}

void het_metrics_reject(struct het_metrics *m, enum het_reject why)
{
    pthread_mutex_lock(&m->mu);
    m->rejected[why]++;
    pthread_mutex_unlock(&m->mu);
}

static void header(struct het_strbuf *o, const char *name, const char *type, const char *help)
{
    het_strbuf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram(struct het_strbuf *o, const char *name, const char *route, const struct het_histogram *h,
                      const double *bounds)
{
    uint64_t cum = 0;
    for (int i = 0; i < HET_METRICS_BUCKETS; i++) {
        cum += h->counts[i];
        het_strbuf_printf(o, "%s_bucket{route=\"%s\",le=\"%g\"} %llu\n", name, route, bounds[i],
                          (unsigned long long)cum);
    }
    het_strbuf_printf(o, "%s_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", name, route, (unsigned long long)h->total);
    het_strbuf_printf(o, "%s_sum{route=\"%s\"} %.6f\n", name, route, h->sum);
    het_strbuf_printf(o, "%s_count{route=\"%s\"} %llu\n", name, route, (unsigned long long)h->total);
}

static void render_requests(const struct het_metrics *m, struct het_strbuf *o, const struct het_metrics_route *r,
                            int n)
{
    static const enum het_finish outcomes[] = { HET_FINISH_STOP, HET_FINISH_LENGTH, HET_FINISH_ERROR,
                                                HET_FINISH_CANCELLED };
    header(o, "het_requests_total", "counter", "Generation requests finished, by route and finish reason.");
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            het_strbuf_printf(o, "het_requests_total{route=\"%s\",model=\"%s\",finish=\"%s\"} %llu\n", r[i].name,
                              r[i].model, het_finish_name(outcomes[k]),
                              (unsigned long long)m->route[i].by_finish[outcomes[k]]);
    header(o, "het_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
    for (int i = 0; i < n; i++)
        het_strbuf_printf(o, "het_prompt_tokens_total{route=\"%s\"} %llu\n", r[i].name,
                          (unsigned long long)m->route[i].prompt_tokens);
    header(o, "het_completion_tokens_total", "counter", "Generated tokens of finished requests.");
    for (int i = 0; i < n; i++)
        het_strbuf_printf(o, "het_completion_tokens_total{route=\"%s\"} %llu\n", r[i].name,
                          (unsigned long long)m->route[i].completion_tokens);
    header(o, "het_time_to_first_token_seconds", "histogram", "From arrival to the first sampled token.");
    for (int i = 0; i < n; i++)
        histogram(o, "het_time_to_first_token_seconds", r[i].name, &m->route[i].ttft, ttft_bounds);
    header(o, "het_decode_tokens_per_second", "histogram", "Decode speed of each request after its first token.");
    for (int i = 0; i < n; i++)
        histogram(o, "het_decode_tokens_per_second", r[i].name, &m->route[i].tps, tps_bounds);
}

/* engine figures: one sample per route each */
enum { E_QUEUED, E_ACTIVE, E_SLOTS, E_STEPS, E_SEQS, E_TOKENS, E_FALLBACKS, E_FREE, E_QCAP, E_CACHED, E_COUNT };
static const struct {
    const char *name, *type, *help;
} engine_rows[E_COUNT] = {
    { "het_queue_depth", "gauge", "Requests waiting for a sequence slot." },
    { "het_active_sequences", "gauge", "Sequences being prefilled or decoded." },
    { "het_sequence_slots", "gauge", "Sequences one batch can hold (--parallel)." },
    { "het_batch_steps_total", "counter", "Batches evaluated." },
    { "het_batch_sequences_total", "counter", "Sum over batches of their sequences (per step: divide by steps)." },
    { "het_batch_tokens_total", "counter", "Sum over batches of their tokens." },
    { "het_fallbacks_total", "counter", "Graph nodes run off the policy's device." },
    { "het_free_slots", "gauge", "Sequence slots free now (het_sequence_slots - het_active_sequences)." },
    { "het_queue_capacity", "gauge", "Requests that may wait (--queue); at het_queue_depth new ones get 503." },
    { "het_prompt_cached_tokens_total", "counter", "Prompt tokens reused from a slot's KV cache (not evaluated again)." },
};

static void render_engines(struct het_strbuf *o, const struct het_metrics_route *r, int n)
{
    for (int k = 0; k < E_COUNT; k++) {
        header(o, engine_rows[k].name, engine_rows[k].type, engine_rows[k].help);
        for (int i = 0; i < n; i++) {
            const struct het_batcher_stats *e = &r[i].engine;
            const uint64_t v[E_COUNT] = { (uint64_t)e->queued, (uint64_t)e->active, (uint64_t)e->n_parallel,
                                          e->steps, e->step_seqs, e->step_tokens, e->fallbacks,
                                          (uint64_t)(e->n_parallel - e->active), (uint64_t)e->max_queue,
                                          e->cached_tokens };
            het_strbuf_printf(o, "%s{route=\"%s\"} %llu\n", engine_rows[k].name, r[i].name,
                              (unsigned long long)v[k]);
        }
    }
    header(o, "het_device_busy_seconds_total", "counter", "Wall time each device spent running splits.");
    for (int i = 0; i < n; i++)
        for (int d = 0; d < r[i].engine.n_devices; d++)
            het_strbuf_printf(o, "het_device_busy_seconds_total{route=\"%s\",device=\"%s\"} %.6f\n", r[i].name,
                              r[i].engine.device_name[d], r[i].engine.device_busy_us[d] / 1e6);
    header(o, "het_device_splits_total", "counter", "Splits each device ran.");
    for (int i = 0; i < n; i++)
        for (int d = 0; d < r[i].engine.n_devices; d++)
            het_strbuf_printf(o, "het_device_splits_total{route=\"%s\",device=\"%s\"} %llu\n", r[i].name,
                              r[i].engine.device_name[d], (unsigned long long)r[i].engine.device_splits[d]);
}

void het_metrics_render(struct het_metrics *m, struct het_strbuf *o, const struct het_metrics_route *routes,
                        int n_routes, int32_t threshold, bool derived, int open_connections)
{
    static const char *const reasons[HET_REJECT_COUNT] = { "queue_full", "too_many_connections", "body_too_large" };
    pthread_mutex_lock(&m->mu);
    render_requests(m, o, routes, n_routes);
    header(o, "het_http_responses_total", "counter", "HTTP responses by status code.");
    for (unsigned c = 100; c < 600; c++)
        if (m->http[c]) het_strbuf_printf(o, "het_http_responses_total{code=\"%u\"} %llu\n", c,
                                          (unsigned long long)m->http[c]);
    header(o, "het_rejected_total", "counter", "Requests refused for lack of capacity or size.");
    for (int i = 0; i < HET_REJECT_COUNT; i++)
        het_strbuf_printf(o, "het_rejected_total{reason=\"%s\"} %llu\n", reasons[i],
                          (unsigned long long)m->rejected[i]);
    pthread_mutex_unlock(&m->mu);
    render_engines(o, routes, n_routes);
    header(o, "het_open_connections", "gauge", "HTTP connections open now.");
    het_strbuf_printf(o, "het_open_connections %d\n", open_connections);
    if (n_routes > 1) {
        header(o, "het_route_threshold_tokens", "gauge",
               "Prompt tokens from which the long route serves (derived=1: from start-up calibration).");
        het_strbuf_printf(o, "het_route_threshold_tokens{derived=\"%d\"} %d\n", derived ? 1 : 0, threshold);
    }
}
