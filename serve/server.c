/*
 * server.c — the HTTP side of `hetrun serve` (libmicrohttpd): start-up of
 * the routes and their engines, connection accounting, request bodies with
 * a size limit, dispatch by path and method, and the small endpoints
 * (/health, /metrics, /v1/models). Generation lives in generate.c.
 *
 * Threading: one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a
 * handler may block while its request is generated; the engines run in
 * their own threads (batcher.c). Connections over max_connections are
 * answered 503 and closed; bodies over max_body get 413.
 *
 * The server may listen before its models are loaded (het_server_listen):
 * until het_server_ready every endpoint answers 503, /health with
 * {"status":"loading"}. With an api_key, every endpoint but /health wants
 * "Authorization: Bearer KEY" (401 otherwise). Each request leaves one
 * access-log line: method, path, status, tokens, milliseconds.
 */
#include "serve/server_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched/clock.h"
#include "serve/utf8.h"

#if defined(HET_HAVE_MHD) && defined(HET_HAVE_JANSSON)
#include <microhttpd.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

static void copy_label(char *dst, size_t cap, const char *src);

struct conn {
    struct het_access acc;
    struct het_strbuf body;
    bool              too_large;  /* over max_body: dropped, answered 413 */
    size_t            dropped;    /* bytes dropped so far                 */
    bool              answered;   /* a response is queued                 */
};

static void logf_(const het_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(const het_server *s, const char *fmt, ...)
{
    if (!s->p.log) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_user, line);
}

/* ---- responses ------------------------------------------------------------------- */

int het_server_send(het_server *s, struct MHD_Connection *c, unsigned status, const char *content_type, char *body,
                    size_t len, const struct het_route_headers *h)
{
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                              "\"code\":null}}";
    struct MHD_Response *r;
    if (body) {
        r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    } else {
        status = 500;
        content_type = "application/json";
        r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (h) {
        MHD_add_response_header(r, "x-het-model", h->model);
        MHD_add_response_header(r, "x-het-devices", h->devices);
        MHD_add_response_header(r, "x-het-route", h->route);
    }
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 413 || status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    het_metrics_http(&s->metrics, status);
    return ret;
}

int het_server_send_error(het_server *s, struct MHD_Connection *c, const struct het_api_error *e,
                          const struct het_route_headers *h)
{
    size_t len = 0;
    char *body = het_api_error_json(e, &len);
    return het_server_send(s, c, (unsigned)e->status, "application/json", body, len, h);
}

bool het_server_client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return false;
    struct pollfd pfd = { .fd = ci->connect_fd, .events = POLLRDHUP };
    return poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

uint64_t het_server_next_id(het_server *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t id = ++s->next_id;
    pthread_mutex_unlock(&s->mu);
    return id;
}

static int send_simple_error(het_server *s, struct MHD_Connection *c, unsigned status, const char *type,
                             const char *code, const char *fmt, const char *arg)
{
    struct het_api_error e;
    het_api_error_set(&e, (int)status, type, code, NULL, fmt, arg);
    return het_server_send_error(s, c, &e, NULL);
}

void het_server_access_log(het_server *s, const struct het_access *a, unsigned status)
{
    char toks[48] = "-";
    if (a->prompt_tokens >= 0)
        snprintf(toks, sizeof toks, "%d+%d cached=%d", a->prompt_tokens, a->completion_tokens, a->cached_tokens);
    logf_(s, "%s %s %u tokens=%s ms=%.1f%s%s%s%s", a->method, a->path, status, toks, het_now_us() / 1e3 - a->t0_ms,
          a->session[0] ? " session=" : "", a->session, a->user[0] ? " user=" : "", a->user);
}

static bool is_ready(het_server *s)
{
    pthread_mutex_lock(&s->mu);
    bool r = s->ready;
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* ---- small endpoints ---------------------------------------------------------------- */

/* a route whose queue is full: new requests to it would get 503 */
static int full_route(het_server *s)
{
    for (int i = 0; i < s->n_routes; i++) {
        struct het_batcher_stats st;
        het_batcher_get_stats(s->routes[i].batcher, &st);
        if (st.queued >= st.max_queue) return i;
    }
    return -1;
}

static int send_health(het_server *s, struct MHD_Connection *c)
{
    struct het_strbuf b = { 0 };
    size_t len;
    if (!is_ready(s)) {
        het_strbuf_puts(&b, "{\"status\":\"loading\"}");
        char *body = het_strbuf_take(&b, &len);
        return het_server_send(s, c, 503, "application/json", body, len, NULL);
    }
    int full = full_route(s);
    het_strbuf_printf(&b, "{\"status\":\"%s\",\"routes\":[", full >= 0 ? "busy" : "ok");
    for (int i = 0; i < s->n_routes; i++) {
        const struct het_serve_route_state *r = &s->routes[i];
        het_strbuf_printf(&b, "%s{\"route\":\"%s\",\"model\":\"%s\",\"devices\":\"%s\",\"n_ctx\":%d,\"parallel\":%d,"
                              "\"chat_format\":\"%s\"}",
                          i ? "," : "", het_route_name((enum het_route_id)i), r->id, r->devices, r->n_ctx,
                          r->n_parallel, het_chat_format_name(r->chat));
    }
    het_strbuf_puts(&b, "]");
    if (s->rule.has_long)
        het_strbuf_printf(&b, ",\"threshold\":%d,\"threshold_derived\":%s", s->rule.threshold,
                          s->rule.derived ? "true" : "false");
    if (full >= 0)
        het_strbuf_printf(&b, ",\"reason\":\"the %s route's queue is full\"",
                          het_route_name((enum het_route_id)full));
    het_strbuf_puts(&b, "}");
    char *body = het_strbuf_take(&b, &len);
    return het_server_send(s, c, full >= 0 ? 503 : 200, "application/json", body, len, NULL);
}

static int send_metrics(het_server *s, struct MHD_Connection *c)
{
    struct het_metrics_route mr[2];
    bool ready = is_ready(s);
    int n_routes = ready ? s->n_routes : 0;
    for (int i = 0; i < n_routes; i++) {
        mr[i].name = het_route_name((enum het_route_id)i);
        mr[i].model = s->routes[i].id;
        het_batcher_get_stats(s->routes[i].batcher, &mr[i].engine);
    }
    pthread_mutex_lock(&s->mu);
    int open = s->n_conns;
    pthread_mutex_unlock(&s->mu);
    struct het_strbuf b = { 0 };
    het_metrics_render(&s->metrics, &b, mr, n_routes, s->rule.threshold, s->rule.derived, open);
    het_strbuf_puts(&b, "# HELP het_ready 1 when the models are loaded and requests are served, 0 while loading.\n"
                        "# TYPE het_ready gauge\n");
    het_strbuf_printf(&b, "het_ready %d\n", ready ? 1 : 0);
    size_t len;
    char *body = het_strbuf_take(&b, &len);
    return het_server_send(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", body, len, NULL);
}

static int send_models(het_server *s, struct MHD_Connection *c)
{
    const char *ids[2];
    int n = 0;
    for (int i = 0; i < s->n_routes; i++)
        if (i == 0 || strcmp(s->routes[i].id, s->routes[0].id)) ids[n++] = s->routes[i].id;
    size_t len = 0;
    char *body = het_api_models_json(ids, n, s->started, &len);
    return het_server_send(s, c, 200, "application/json", body, len, NULL);
}

static char *dump_json(json_t *j, size_t *len)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (s) *len = strlen(s);
    return s;
}

/* the body as a JSON object holding only the given keys; NULL: e says why */
static json_t *small_request(const struct conn *st, const char *const *keys, int n_keys, struct het_api_error *e)
{
    json_error_t jerr;
    json_t *root = het_utf8_valid(st->body.p ? st->body.p : "", st->body.len)
                       ? json_loadb(st->body.p ? st->body.p : "", st->body.len, 0, &jerr) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        het_api_error_set(e, 400, "invalid_request_error", NULL, NULL, "the request body must be a JSON object");
        return NULL;
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        bool known = false;
        for (int i = 0; i < n_keys && !known; i++) known = !strcmp(k, keys[i]);
        if (!known) {
            het_api_error_set(e, 400, "invalid_request_error", "unknown_parameter", k, "unknown field '%.60s'", k);
            json_decref(root);
            return NULL;
        }
    }
    return root;
}

/* a token's text: a string when it is UTF-8, else its bytes (as llama-server) */
static json_t *piece_json(const het_tokenizer *tok, int32_t id)
{
    char buf[256];
    int n = het_token_to_piece(tok, id, buf, sizeof buf, true);
    if (n < 0) n = 0;
    if (het_utf8_valid(buf, (size_t)n)) return json_stringn(buf, (size_t)n);
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer((unsigned char)buf[i]));
    return a;
}

/* POST /tokenize {"content", "add_special": false, "parse_special": true, "with_pieces": false} */
static int send_tokenize(het_server *s, struct MHD_Connection *c, const struct conn *st)
{
    static const char *const keys[] = { "content", "add_special", "parse_special", "with_pieces", "model" };
    struct het_api_error e;
    json_t *root = small_request(st, keys, 5, &e);
    if (!root) return het_server_send_error(s, c, &e, NULL);
    json_t *content = json_object_get(root, "content");
    json_t *as = json_object_get(root, "add_special"), *ps = json_object_get(root, "parse_special"),
           *wp = json_object_get(root, "with_pieces");
    const char *bad = !json_is_string(content) ? "content" : as && !json_is_boolean(as) ? "add_special"
                    : ps && !json_is_boolean(ps) ? "parse_special" : wp && !json_is_boolean(wp) ? "with_pieces" : NULL;
    if (bad) {
        het_api_error_set(&e, 400, "invalid_request_error", NULL, bad, "'%s' must be %s", bad,
                          !strcmp(bad, "content") ? "a string" : "true or false");
        json_decref(root);
        return het_server_send_error(s, c, &e, NULL);
    }
    const het_tokenizer *tok = s->routes[0].tok;
    int32_t *ids = NULL, n = 0;
    het_error err = { 0 };
    if (het_tokenize(tok, json_string_value(content), json_string_length(content), json_is_true(as),
                     !ps || json_is_true(ps), &ids, &n, &err) != HET_OK) {
        het_api_error_set(&e, 400, "invalid_request_error", NULL, "content", "cannot tokenize: %s", err.msg);
        json_decref(root);
        return het_server_send_error(s, c, &e, NULL);
    }
    json_t *arr = json_array();
    for (int32_t i = 0; i < n; i++)
        json_array_append_new(arr, json_is_true(wp) ? json_pack("{s:i, s:o}", "id", (json_int_t)ids[i], "piece",
                                                                piece_json(tok, ids[i]))
                                                    : json_integer(ids[i]));
    free(ids);
    json_decref(root);
    size_t len = 0;
    char *body = dump_json(json_pack("{s:o}", "tokens", arr), &len);
    return het_server_send(s, c, 200, "application/json", body, len, NULL);
}

/* POST /detokenize {"tokens": [ids]} -> {"content"} */
static int send_detokenize(het_server *s, struct MHD_Connection *c, const struct conn *st)
{
    static const char *const keys[] = { "tokens", "model" };
    struct het_api_error e;
    json_t *root = small_request(st, keys, 2, &e);
    if (!root) return het_server_send_error(s, c, &e, NULL);
    json_t *toks = json_object_get(root, "tokens");
    const het_tokenizer *tok = s->routes[0].tok;
    int32_t n_vocab = het_tokenizer_n_vocab(tok);
    struct het_strbuf text = { 0 };
    het_strbuf_append(&text, "", 0);
    bool ok = json_is_array(toks);
    for (size_t i = 0; ok && i < json_array_size(toks); i++) {
        json_t *t = json_array_get(toks, i);
        ok = json_is_integer(t) && json_integer_value(t) >= 0 && json_integer_value(t) < n_vocab;
        char buf[256];
        int n = ok ? het_token_to_piece(tok, (int32_t)json_integer_value(t), buf, sizeof buf, false) : 0;
        if (n > 0) het_strbuf_append(&text, buf, (size_t)n);
    }
    json_decref(root);
    if (!ok) {
        het_strbuf_free(&text);
        het_api_error_set(&e, 400, "invalid_request_error", NULL, "tokens",
                          "'tokens' must be an array of token ids (0..%d)", n_vocab - 1);
        return het_server_send_error(s, c, &e, NULL);
    }
    struct het_strbuf clean = { 0 };
    het_utf8_sanitize(&clean, text.p, text.len);
    het_strbuf_free(&text);
    size_t len = 0;
    char *body = clean.oom ? NULL : dump_json(json_pack("{s:s%}", "content", clean.p ? clean.p : "", clean.len), &len);
    het_strbuf_free(&clean);
    return het_server_send(s, c, 200, "application/json", body, len, NULL);
}

/* GET /props: llama-server's shape, plus het's version and routes */
static int send_props(het_server *s, struct MHD_Connection *c)
{
    const struct het_serve_route_state *r = &s->routes[0];
    const char *tmpl = het_gguf_get_str(het_model_gguf(r->model), "tokenizer.chat_template");
    json_t *gen = json_pack("{s:i, s:i, s:{s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:i}}", "n_ctx", (json_int_t)r->n_ctx,
                            "n_predict", (json_int_t)s->p.default_max_tokens, "params", "temperature", 1.0,
                            "top_p", 1.0, "top_k", (json_int_t)0, "min_p", 0.0, "repeat_penalty", 1.0,
                            "presence_penalty", 0.0, "frequency_penalty", 0.0, "repeat_last_n", (json_int_t)64);
    json_t *o = json_pack("{s:o, s:i, s:s, s:s, s:s, s:s, s:s}", "default_generation_settings", gen, "total_slots",
                          (json_int_t)r->n_parallel, "model_path", s->p.model_path ? s->p.model_path : r->id,
                          "model", r->id, "chat_template", tmpl ? tmpl : "", "chat_format",
                          het_chat_format_name(r->chat), "version", HET_VERSION);
    if (o) json_object_set_new(o, "build_info", json_sprintf("het %s", HET_VERSION));
    size_t len = 0;
    char *body = dump_json(o, &len);
    return het_server_send(s, c, 200, "application/json", body, len, NULL);
}

/* ---- dispatch --------------------------------------------------------------------------- */

static int dispatch(het_server *s, struct MHD_Connection *c, const char *url, const char *method, struct conn *st)
{
    static const struct {
        const char *path, *method;
        int         what;
    } table[] = {
        { "/health", "GET", 0 }, { "/metrics", "GET", 1 }, { "/v1/models", "GET", 2 },
        { "/v1/completions", "POST", 3 }, { "/v1/chat/completions", "POST", 4 }, { "/tokenize", "POST", 5 },
        { "/detokenize", "POST", 6 }, { "/props", "GET", 7 },
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(url, table[i].path)) continue;
        bool head_ok = !strcmp(method, "HEAD") && !strcmp(table[i].method, "GET");
        if (strcmp(method, table[i].method) && !head_ok)
            return send_simple_error(s, c, 405, "invalid_request_error", "method_not_allowed",
                                     "%s is not allowed here", method);
        if (table[i].what == 0) return send_health(s, c);
        if (table[i].what == 1) return send_metrics(s, c);
        if (!is_ready(s))
            return send_simple_error(s, c, 503, "server_error", "loading", "%s", "the model is still loading; retry later");
        const char *body = st->body.p ? st->body.p : "";
        switch (table[i].what) {
        case 2: return send_models(s, c);
        case 3: return het_serve_generate(s, c, HET_API_COMPLETION, body, st->body.len, &st->acc);
        case 4: return het_serve_generate(s, c, HET_API_CHAT, body, st->body.len, &st->acc);
        case 5: return send_tokenize(s, c, st);
        case 6: return send_detokenize(s, c, st);
        default: return send_props(s, c);
        }
    }
    return send_simple_error(s, c, 404, "invalid_request_error", "not_found", "no endpoint %s", url);
}

/* constant-time comparison of the Authorization header with "Bearer KEY" */
static bool authorized(const het_server *s, struct MHD_Connection *c)
{
    const char *key = s->p.api_key;
    if (!key || !*key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t n = strlen(key), m = strlen(h);
    unsigned diff = (unsigned)(n ^ m);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)key[i] ^ (unsigned char)(i < m ? h[i] : 0);
    return diff == 0;
}

static int refuse(het_server *s, struct MHD_Connection *c, unsigned status)
{
    char limit[32];
    if (status == 401) {
        struct het_api_error e;
        het_api_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                          "missing or incorrect API key: send 'Authorization: Bearer KEY'");
        size_t len = 0;
        char *body = het_api_error_json(&e, &len);
        struct MHD_Response *r = body ? MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE) : NULL;
        if (!r) {
            free(body);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        enum MHD_Result ret = MHD_queue_response(c, 401, r);
        MHD_destroy_response(r);
        het_metrics_http(&s->metrics, 401);
        return ret;
    }
    if (status == 413) {
        het_metrics_reject(&s->metrics, HET_REJECT_BODY_TOO_LARGE);
        snprintf(limit, sizeof limit, "%zu", s->p.max_body);
        return send_simple_error(s, c, 413, "invalid_request_error", "request_too_large",
                                 "the request body is larger than the limit of %s bytes", limit);
    }
    het_metrics_reject(&s->metrics, HET_REJECT_CONNECTIONS);
    snprintf(limit, sizeof limit, "%d", s->p.max_connections);
    return send_simple_error(s, c, 503, "server_error", "too_many_connections",
                             "too many open connections (limit %s); retry later", limit);
}

/* Bodies over max_body are read and dropped, then answered 413 (clients that
 * are still sending see the answer rather than a reset); past
 * HARD_LIMIT_FACTOR times the limit the answer goes out at once and the
 * connection is closed. */
#define HARD_LIMIT_FACTOR 16

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    het_server *s = cls;
    struct conn *st = *con_cls;
    size_t hard = s->p.max_body * HARD_LIMIT_FACTOR;
    if (!st) {
        if (!(st = calloc(1, sizeof *st))) return MHD_NO;
        *con_cls = st;
        st->acc.t0_ms = het_now_us() / 1e3;
        st->acc.prompt_tokens = st->acc.completion_tokens = -1;
        snprintf(st->acc.method, sizeof st->acc.method, "%s", method);
        copy_label(st->acc.path, sizeof st->acc.path, url);
        const char *sid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Session-Id");
        if (sid) copy_label(st->acc.session, sizeof st->acc.session, sid);
        pthread_mutex_lock(&s->mu);
        bool over = s->n_conns > s->p.max_connections;
        pthread_mutex_unlock(&s->mu);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;
        st->too_large = len > s->p.max_body;
        bool auth = !strcmp(url, "/health") || authorized(s, c);
        if (over || len > hard || !auth) {
            st->answered = true;
            return (enum MHD_Result)refuse(s, c, over ? 503 : !auth ? 401 : 413);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (st->answered) return MHD_YES;
        if (!st->too_large && st->body.len + n <= s->p.max_body) {
            het_strbuf_append(&st->body, upload, n);
            return MHD_YES;
        }
        if (!st->too_large) st->dropped = st->body.len;
        st->too_large = true;
        het_strbuf_free(&st->body);
        st->dropped += n;
        if (st->dropped > hard) {
            st->answered = true;
            return (enum MHD_Result)refuse(s, c, 413);
        }
        return MHD_YES;
    }
    if (st->answered) return MHD_YES;
    st->answered = true;
    if (st->too_large) return (enum MHD_Result)refuse(s, c, 413);
    if (st->body.oom) return (enum MHD_Result)send_simple_error(s, c, 500, "server_error", NULL, "out of memory%s", "");
    return (enum MHD_Result)dispatch(s, c, url, method, st);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct conn *st = *con_cls;
    if (!st) return;
    if (!st->acc.deferred) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_HTTP_STATUS);
        het_server_access_log(cls, &st->acc, ci ? ci->http_status : 0);
    }
    het_strbuf_free(&st->body);
    free(st);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    het_server *s = cls;
    pthread_mutex_lock(&s->mu);
    s->n_conns += toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1;
    pthread_mutex_unlock(&s->mu);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    const het_server *s = cls;
    if (!s->p.log) return;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    s->p.log(s->p.log_user, line);
}

/* ---- start-up ------------------------------------------------------------------------------ */

/* ids become Prometheus label values and HTTP header values: keep them plain */
static void copy_label(char *dst, size_t cap, const char *src)
{
    size_t i = 0;
    for (; src && src[i] && i + 1 < cap; i++) {
        unsigned char ch = (unsigned char)src[i];
        dst[i] = ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\' ? '_' : (char)ch;
    }
    dst[i] = 0;
}

static enum het_status open_route(het_server *s, int i, het_error *err)
{
    const struct het_serve_route *in = &s->p.routes[i];
    struct het_serve_route_state *r = &s->routes[i];
    if (!in->model || !in->sched)
        return het_error_set(err, HET_ERR_INVALID, "serve: route %d has no model or scheduler", i);
    struct het_batcher_params bp = {
        .model = in->model, .sched = in->sched, .n_ctx = in->n_ctx, .n_parallel = in->n_parallel,
        .batch_tokens = s->p.batch_tokens, .max_queue = s->p.max_queue,
    };
    r->batcher = het_batcher_init(&bp, err);
    if (!r->batcher) {
        het_error_prefix(err, "serve: %s route", het_route_name((enum het_route_id)i));
        return err ? err->status : HET_ERR_INVALID;
    }
    r->model = in->model;
    r->tok = het_model_tokenizer(in->model);
    r->chat = het_chat_format_detect(het_gguf_get_str(het_model_gguf(in->model), "tokenizer.chat_template"));
    copy_label(r->id, sizeof r->id, in->id ? in->id : "model");
    copy_label(r->devices, sizeof r->devices, in->devices ? in->devices : "");
    r->n_ctx = het_batcher_n_ctx(r->batcher);
    r->n_parallel = in->n_parallel > 0 ? in->n_parallel : 4;
    return HET_OK;
}

static enum het_status set_rule(het_server *s, het_error *err)
{
    struct het_route_rule *rule = &s->rule;
    rule->has_long = s->n_routes == 2;
    rule->n_ctx_default = s->routes[0].n_ctx;
    rule->n_ctx_long = rule->has_long ? s->routes[1].n_ctx : 0;
    rule->threshold = s->p.long_threshold;
    if (!rule->has_long || rule->threshold > 0) return HET_OK;
    struct het_route_cost cost[2];
    het_model *const models[2] = { s->routes[0].model, s->routes[1].model };
    het_context *const ctxs[2] = { het_batcher_context(s->routes[0].batcher),
                                   het_batcher_context(s->routes[1].batcher) };
    enum het_status st = het_route_calibrate(models, ctxs, 2, cost, err);
    if (st != HET_OK) return st;
    for (int i = 0; i < 2; i++) {
        logf_(s, "calibration %s route: prefill %.3f ms + %.4f ms/token; decode step %.3f ms + %.5f ms/token of cache",
              het_route_name((enum het_route_id)i), cost[i].prefill_ms0, cost[i].prefill_ms_tok, cost[i].decode_ms0,
              cost[i].decode_ms_tok);
    }
    rule->threshold = het_route_derive_threshold(&cost[0], &cost[1], s->p.default_max_tokens, rule->n_ctx_default);
    rule->derived = true;
    logf_(s, "long-route threshold: %d prompt tokens (derived for %d generated tokens)", rule->threshold,
          s->p.default_max_tokens);
    return HET_OK;
}

static enum het_status resolve(const het_server *s, struct sockaddr_storage *ss, socklen_t *len, bool *v6,
                               het_error *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", s->p.port);
    int rc = getaddrinfo(s->p.host, port, &hints, &res);
    if (rc || !res)
        return het_error_set(err, HET_ERR_INVALID, "serve: cannot resolve host '%s': %s", s->p.host, gai_strerror(rc));
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return HET_OK;
}

static enum het_status start_http(het_server *s, het_error *err)
{
    struct sockaddr_storage addr;
    socklen_t alen = 0;
    bool v6 = false;
    enum het_status st = resolve(s, &addr, &alen, &v6, err);
    if (st != HET_OK) return st;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                     (v6 ? MHD_USE_IPv6 : 0);
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->p.port, NULL, NULL, on_request, s,
                              MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s->p.max_connections + 8),
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->p.idle_timeout_s,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                              MHD_OPTION_END);
    if (!s->mhd)
        return het_error_set(err, HET_ERR_IO, "serve: cannot listen on %s:%d (address in use or not local?)",
                             s->p.host, s->p.port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->p.port;
    return HET_OK;
}

static void apply_defaults(struct het_serve_params *p)
{
    if (!p->host) p->host = "127.0.0.1";
    if (p->batch_tokens <= 0) p->batch_tokens = 512;
    if (p->max_queue <= 0) p->max_queue = 64;
    if (p->max_connections <= 0) p->max_connections = 64;
    if (p->max_body == 0) p->max_body = 1u << 20;
    if (p->default_max_tokens <= 0) p->default_max_tokens = 256;
    if (p->idle_timeout_s <= 0) p->idle_timeout_s = 300;
}

het_server *het_server_listen(const struct het_serve_params *p, het_error *err)
{
    if (p->port < 0 || p->port > 65535) {
        het_error_set(err, HET_ERR_INVALID, "serve: port %d out of range", p->port);
        return NULL;
    }
    het_server *s = calloc(1, sizeof *s);
    if (!s) {
        het_error_set(err, HET_ERR_NOMEM, "serve: out of memory");
        return NULL;
    }
    s->p = *p;
    s->p.n_routes = 0;
    apply_defaults(&s->p);
    pthread_mutex_init(&s->mu, NULL);
    het_metrics_init(&s->metrics);
    s->started = (long long)time(NULL);
    if (start_http(s, err) != HET_OK) {
        het_server_stop(s);
        return NULL;
    }
    return s;
}

enum het_status het_server_ready(het_server *s, const struct het_serve_route *routes, int n_routes, het_error *err)
{
    if (n_routes < 1 || n_routes > 2)
        return het_error_set(err, HET_ERR_INVALID, "serve: %d routes (1 or 2)", n_routes);
    if (s->n_routes) return het_error_set(err, HET_ERR_INVALID, "serve: the routes are already open");
    for (int i = 0; i < n_routes; i++) s->p.routes[i] = routes[i];
    s->p.n_routes = n_routes;
    for (int i = 0; i < n_routes; i++, s->n_routes++)
        if (open_route(s, i, err) != HET_OK) return err ? err->status : HET_ERR_INVALID;
    enum het_status st = set_rule(s, err);
    for (int i = 0; i < s->n_routes && st == HET_OK; i++) st = het_batcher_start(s->routes[i].batcher, err);
    if (st != HET_OK) return st;
    pthread_mutex_lock(&s->mu);
    s->ready = true;
    pthread_mutex_unlock(&s->mu);
    return HET_OK;
}

het_server *het_server_start(const struct het_serve_params *p, het_error *err)
{
    if (p->n_routes < 1 || p->n_routes > 2) {
        het_error_set(err, HET_ERR_INVALID, "serve: %d routes (1 or 2)", p->n_routes);
        return NULL;
    }
    het_server *s = het_server_listen(p, err);
    if (s && het_server_ready(s, p->routes, p->n_routes, err) != HET_OK) {
        het_server_stop(s);
        return NULL;
    }
    return s;
}

int het_server_port(const het_server *s) { return s->port; }
const struct het_route_rule *het_server_route_rule(const het_server *s) { return &s->rule; }

void het_server_stop(het_server *s)
{
    if (!s) return;
    /* engines first: waiting handlers see their jobs end and return, so the
     * connection threads MHD joins below can finish */
    for (int i = 0; i < s->n_routes; i++) het_batcher_stop(s->routes[i].batcher);
    if (s->mhd) MHD_stop_daemon(s->mhd);
    for (int i = 0; i < s->n_routes; i++) het_batcher_free(s->routes[i].batcher);
    het_metrics_free(&s->metrics);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

#else /* no libmicrohttpd or jansson */

het_server *het_server_start(const struct het_serve_params *p, het_error *err)
{
    het_error_set(err, HET_ERR_UNSUPPORTED,
                  "serve: this build has no HTTP server (install libmicrohttpd-dev and libjansson-dev, rebuild)");
    return NULL;
}
het_server *het_server_listen(const struct het_serve_params *p, het_error *err) { return het_server_start(p, err); }
enum het_status het_server_ready(het_server *s, const struct het_serve_route *routes, int n_routes, het_error *err)
{
    return het_error_set(err, HET_ERR_UNSUPPORTED, "serve: this build has no HTTP server");
}
int het_server_port(const het_server *s) { return 0; }
const struct het_route_rule *het_server_route_rule(const het_server *s) { return NULL; }
void het_server_stop(het_server *s) { (void)s; }

#endif
