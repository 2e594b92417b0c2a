/*
 * server_impl.h — what server.c (HTTP plumbing, lifecycle, small endpoints)
 * and generate.c (the completion endpoints) share: the server's state and
 * the helpers that send a response.
 */
#ifndef HET_SERVE_SERVER_IMPL_H
#define HET_SERVE_SERVER_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "het/serve.h"
#include "serve/api.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/strbuf.h"

struct MHD_Connection;

struct het_serve_route_state {
    het_batcher         *batcher;
    het_model           *model;
    const het_tokenizer *tok;
    enum het_chat_format chat;
    char                 id[128];
    char                 devices[128];
    int32_t              n_ctx, n_parallel;
};

/* One request, for its access-log line: what arrived and how it went. */
struct het_access {
    char   method[8], path[64];
    char   session[64];       /* X-Session-Id, "" when absent          */
    char   user[64];          /* the body's "user", "" when absent     */
    double t0_ms;             /* arrival                               */
    int    prompt_tokens, completion_tokens;   /* -1: not a generation */
    int    cached_tokens;     /* of prompt_tokens, reused from a KV cache */
    bool   deferred;          /* a stream logs itself when it ends     */
};
/* Write the line (status: the HTTP status sent). */
void het_server_access_log(het_server *s, const struct het_access *a, unsigned status);

struct het_server {
    struct het_serve_params      p;
    struct het_serve_route_state routes[2];
    int                          n_routes;
    struct het_route_rule        rule;
    struct het_metrics           metrics;
    struct MHD_Daemon           *mhd;
    int                          port;
    pthread_mutex_t              mu;        /* n_conns, next_id */
    int                          n_conns;
    uint64_t                     next_id;
    long long                    started;   /* unix time */
    bool                         ready;     /* routes open (under mu); before: 503 */
};

/* Headers every generation response carries (x-het-*). */
struct het_route_headers {
    const char *model, *devices, *route;
};

/* Queue a response with body (malloc'ed, taken; NULL = 500 out of memory). */
int het_server_send(het_server *s, struct MHD_Connection *c, unsigned status, const char *content_type, char *body,
                    size_t len, const struct het_route_headers *h);
int het_server_send_error(het_server *s, struct MHD_Connection *c, const struct het_api_error *e,
                          const struct het_route_headers *h);
/* Has the peer closed the connection (checked without blocking)? */
bool het_server_client_gone(struct MHD_Connection *c);
uint64_t het_server_next_id(het_server *s);

/* generate.c: POST /v1/completions and /v1/chat/completions */
int het_serve_generate(het_server *s, struct MHD_Connection *c, enum het_api_kind kind, const char *body, size_t len,
                       struct het_access *acc);

#endif /* HET_SERVE_SERVER_IMPL_H */
