/*
 * serve.h — serving a model over HTTP with an OpenAI-shaped API.
 *
 * A het_server runs one or two routes. Each route is a model on its own
 * scheduler (device set) with a context of n_parallel sequences, driven by a
 * continuous-batching engine: one thread owns the context and runs one batch
 * per step over every active sequence (a new request's prompt, in chunks,
 * next to the running decodes). With two routes, a request whose prompt has
 * at least `threshold` tokens (or does not fit the default context) runs on
 * the long route; the threshold is given, or derived at start-up from a
 * short calibration of both routes (het_route_calibrate).
 *
 * The pieces the server is built from are public too, so `hetrun run` can
 * apply the same routing rule and tests can check the chat templates.
 */
#ifndef HET_SERVE_H
#define HET_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/chat.h"
#include "het/model.h"
#include "het/status.h"
#include "het/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- routing ---------------------------------------------------------------- */

/* Measured cost of one route: prefill ms = prefill_ms0 + prefill_ms_tok * n;
 * each decode step ms = decode_ms0 + decode_ms_tok * (tokens in the cache). */
struct het_route_cost {
    double prefill_ms0, prefill_ms_tok;
    double decode_ms0, decode_ms_tok;
};
/* Calibrate n_routes routes (model m[i] with context ctx[i]; sequence 0 is
 * used and reset after): prefills of n/8 and n = min(256, smallest n_ctx / 2)
 * tokens, each followed by 8 decode steps, the fastest of 3 tries kept. The
 * routes' tries alternate, so load from elsewhere weighs on each alike. */
enum het_status het_route_calibrate(het_model *const *m, het_context *const *ctx, int n_routes,
                                    struct het_route_cost *out, het_error *err);
/* Predicted ms to prefill n_prompt tokens and decode n_out. */
double het_route_cost_ms(const struct het_route_cost *c, int32_t n_prompt, int32_t n_out);
/* The smallest prompt length (1..max_prompt) from which the long route is
 * predicted to finish a request of n_out tokens at least 10% sooner;
 * max_prompt + 1 if it never is. */
int32_t het_route_derive_threshold(const struct het_route_cost *dflt, const struct het_route_cost *lng,
                                   int32_t n_out, int32_t max_prompt);

enum het_route_id { HET_ROUTE_DEFAULT = 0, HET_ROUTE_LONG = 1 };

struct het_route_rule {
    bool    has_long;
    int32_t threshold;       /* prompt tokens from which the long route serves */
    bool    derived;         /* threshold came from calibration               */
    int32_t n_ctx_default;   /* per-sequence context of each route            */
    int32_t n_ctx_long;
};
/* Choose the route for a prompt of n_prompt tokens that wants n_predict more.
 * reason (one line) says why. */
enum het_route_id het_route_choose(const struct het_route_rule *r, int32_t n_prompt, int32_t n_predict,
                                   char *reason, size_t cap);
const char *het_route_name(enum het_route_id r);   /* "default", "long" */

/* ---- server ----------------------------------------------------------------- */
typedef struct het_server het_server;

struct het_serve_route {
    het_model  *model;        /* not owned; must outlive the server             */
    het_sched  *sched;        /* not owned; used only by this route's engine     */
    const char *id;           /* model id in /v1/models and x-het-model          */
    const char *devices;      /* device names for x-het-devices ("cpu,vulkan0")  */
    int32_t     n_ctx;        /* tokens per sequence (0: model default)           */
    int32_t     n_parallel;   /* sequences batched together (0: 4)               */
};

struct het_serve_params {
    const char *host;              /* NULL: 127.0.0.1                              */
    int         port;              /* 0: any free port (het_server_port)           */
    struct het_serve_route routes[2];  /* [0] default, [1] long (optional)         */
    int         n_routes;
    int32_t     long_threshold;    /* <= 0: derive from calibration                */
    int32_t     batch_tokens;      /* prompt tokens per step (0: 512)              */
    int         max_queue;         /* waiting requests per route (0: 64)           */
    int         max_connections;   /* open connections (0: 64); more get 503       */
    size_t      max_body;          /* request body bytes (0: 1 MiB); more get 413  */
    int32_t     default_max_tokens;/* when a request gives none (0: 256)          */
    int         idle_timeout_s;    /* close idle connections (0: 300)              */
    const char *api_key;           /* Bearer key every endpoint but /health asks
                                      for (401 otherwise); NULL/"": none          */
    const char *model_path;        /* for /props (informational; may be NULL)      */
    /* (optional) one line per event worth logging (start-up, calibration) */
    void      (*log)(void *user, const char *line);
    void       *log_user;
};

/* Start serving (threads run in the background). NULL on error: the address
 * is in use, a route cannot get a context, or this build has no HTTP
 * support (HET_ERR_UNSUPPORTED). Same as het_server_listen followed by
 * het_server_ready with p->routes. */
het_server *het_server_start(const struct het_serve_params *p, het_error *err);
/* Listen before the models are loaded (p->routes are not read): /health
 * answers 503 {"status":"loading"} and every other endpoint 503 until
 * het_server_ready, so a load balancer can tell a replica still loading
 * from a dead one. */
het_server *het_server_listen(const struct het_serve_params *p, het_error *err);
/* Open the routes (p->routes, n_routes of them) and start answering. On
 * error the server keeps answering 503; stop it with het_server_stop. */
enum het_status het_server_ready(het_server *s, const struct het_serve_route *routes, int n_routes, het_error *err);
int         het_server_port(const het_server *s);
const struct het_route_rule *het_server_route_rule(const het_server *s);
/* Stop accepting, end running requests with an error, join every thread. */
void        het_server_stop(het_server *s);   /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif /* HET_SERVE_H */
