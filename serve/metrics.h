/*
 * metrics.h — the server's counters and histograms, rendered in the
 * Prometheus text format for GET /metrics. Connection threads record into
 * it under its own lock; engine figures (queue, devices) come from batcher
 * snapshots at render time.
 */
#ifndef HET_SERVE_METRICS_H
#define HET_SERVE_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "serve/batcher.h"
#include "serve/strbuf.h"

#define HET_METRICS_BUCKETS 14

struct het_histogram {
    uint64_t counts[HET_METRICS_BUCKETS]; /* per bucket, not cumulative */
    uint64_t total;
    double   sum;
};

struct het_route_metrics {
    uint64_t by_finish[5];        /* enum het_finish */
    uint64_t prompt_tokens, completion_tokens;
    struct het_histogram ttft;    /* seconds */
    struct het_histogram tps;     /* decode tokens per second */
};

enum het_reject {
    HET_REJECT_QUEUE_FULL = 0,
    HET_REJECT_CONNECTIONS,
    HET_REJECT_BODY_TOO_LARGE,
    HET_REJECT_COUNT,
};

struct het_metrics {
    pthread_mutex_t mu;
    struct het_route_metrics route[2];
    uint64_t http[600];           /* responses by status code */
    uint64_t rejected[HET_REJECT_COUNT];
};

/* What render needs to know about a route besides the counters. */
struct het_metrics_route {
    const char *name;             /* "default", "long" */
    const char *model;
    struct het_batcher_stats engine;
};

void het_metrics_init(struct het_metrics *m);
void het_metrics_free(struct het_metrics *m);
void het_metrics_request(struct het_metrics *m, int route, const struct het_job_info *info);
void het_metrics_http(struct het_metrics *m, unsigned code);
void het_metrics_reject(struct het_metrics *m, enum het_reject why);
/* Append the whole exposition to out. */
void het_metrics_render(struct het_metrics *m, struct het_strbuf *out, const struct het_metrics_route *routes,
                        int n_routes, int32_t threshold, bool derived, int open_connections);

#endif /* HET_SERVE_METRICS_H */
