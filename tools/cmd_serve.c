/*
 * cmd_serve.c — `hetrun serve`: open the model (and --long-model) on their
 * device sets, start the HTTP server (het/serve.h) and run until SIGINT or
 * SIGTERM. The listening address goes to stderr as
 * "hetrun serve: listening on http://HOST:PORT" so scripts can find a port
 * chosen with --port 0.
 */
#include "tools/hetrun.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "het/serve.h"

#define SERVE_FLAGS                                                                                           \
    "-m -n -t -c --host --port --parallel --queue --max-conns --batch --long-model --long-threshold " \
    "--long-devices --long-ctx --long-parallel --api-key -v " HR_PLACEMENT_FLAGS

static void log_line(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "hetrun serve: %s\n", line);
}

/* "stories260K" from ".../stories260K.gguf" */
static void model_id(const char *path, char *id, size_t cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 5 && !strcmp(base + n - 5, ".gguf")) n -= 5;
    snprintf(id, cap, "%.*s", (int)n, base);
}

static void device_list(const struct hr_session *s, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < s->n_devices; i++) {
        size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", i ? "," : "", het_device_name(s->devices[i]));
    }
}

static int serve_until_signal(het_server *srv, const struct het_serve_params *p, const struct hr_opts *o,
                              const sigset_t *set)
{
    het_error err = { 0 };
    if (het_server_ready(srv, p->routes, p->n_routes, &err) != HET_OK) {
        hr_error(o, "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "hetrun serve: listening on http://%s:%d\n", p->host, het_server_port(srv));
    int sig = 0;
    sigwait(set, &sig);
    fprintf(stderr, "hetrun serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "serve", SERVE_FLAGS, argc, argv)) return 2;
    if (!o.long_model && (o.long_threshold || o.long_devices || o.long_ctx || o.long_parallel)) {
        hr_error(&o, "--long-threshold, --long-devices, --long-ctx and --long-parallel need --long-model");
        return 2;
    }
    struct hr_session s[2];
    memset(s, 0, sizeof s);
    char ids[2][128], devs[2][128];
    struct het_serve_params p = {
        .host = o.host ? o.host : "127.0.0.1", .port = o.port, .n_routes = o.long_model ? 2 : 1,
        .long_threshold = o.long_threshold, .batch_tokens = o.batch, .max_queue = o.queue,
        .max_connections = o.max_conns, .default_max_tokens = o.n_predict > 0 ? o.n_predict : 0, .log = log_line,
        .api_key = o.api_key ? o.api_key : getenv("HET_API_KEY"), .model_path = o.model,
    };
    /* listen first: while the models load, /health answers 503 (loading) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread starts: they inherit it */
    signal(SIGPIPE, SIG_IGN);
    het_error err = { 0 };
    het_server *srv = het_server_listen(&p, &err);
    if (!srv) {
        hr_error(&o, "%s", err.msg);
        return 1;
    }
    fprintf(stderr, "hetrun serve: loading on http://%s:%d (/health answers 503 until ready)\n", p.host,
            het_server_port(srv));
    int rc = 1;
    for (int i = 0; i < p.n_routes; i++) {
        struct hr_opts ro = o;
        if (i == 1) hr_long_opts(&o, &ro);
        if (!hr_session_open(&s[i], &ro, false)) goto done;
        model_id(ro.model, ids[i], sizeof ids[i]);
        device_list(&s[i], devs[i], sizeof devs[i]);
        p.routes[i] = (struct het_serve_route){
            .model = s[i].model, .sched = s[i].sched, .id = ids[i], .devices = devs[i], .n_ctx = ro.n_ctx,
            .n_parallel = ro.parallel > 0 ? ro.parallel : HR_SERVE_PARALLEL,
        };
    }
    rc = serve_until_signal(srv, &p, &o, &set);
done:
    het_server_stop(srv); /* before the sessions: its engines use their models */
    for (int i = 0; i < 2; i++) hr_session_close(&s[i]);
    return rc;
}
