/*
 * generate.c — POST /v1/completions and /v1/chat/completions: validate,
 * tokenize (chat template for chat), choose the route, queue the job on
 * that route's engine, then either wait for the whole answer or stream it
 * as server-sent events ending with `data: [DONE]`.
 *
 * A client that goes away is noticed while waiting (the socket reports the
 * peer's close) or when a stream write fails; its job is released, which
 * frees its sequence slot at the engine's next step.
 */
#include "serve/server_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(HET_HAVE_MHD) && defined(HET_HAVE_JANSSON)
#include <microhttpd.h>

#define WAIT_SLICE_MS 100  /* how often a waiting handler checks its client */

struct plan {
    int      route;
    int32_t *tokens;
    int32_t  n;
    int32_t  max_tokens;
    char     reason[200];
};

static bool model_known(const het_server *s, const char *model)
{
    if (!model || !strcmp(model, "auto")) return true;
    for (int i = 0; i < s->n_routes; i++)
        if (!strcmp(model, s->routes[i].id)) return true;
    return false;
}

static bool tokenize_for(const het_server *s, int route, const struct het_api_request *req, int32_t **ids,
                         int32_t *n, struct het_api_error *e)
{
    const struct het_serve_route_state *r = &s->routes[route];
    if (req->prompt_tokens) {
        *ids = malloc((size_t)req->n_prompt_tokens * sizeof **ids);
        if (!*ids) goto oom;
        memcpy(*ids, req->prompt_tokens, (size_t)req->n_prompt_tokens * sizeof **ids);
        *n = req->n_prompt_tokens;
        return true;
    }
    size_t len = req->prompt_len;
    const char *text = req->prompt;
    char *owned = NULL;
    if (req->kind == HET_API_CHAT) {
        if (!(owned = het_chat_render(r->chat, req->msgs, req->n_msgs, &len))) goto oom;
        text = owned;
    }
    het_error err = { 0 };
    enum het_status st = het_prompt_tokenize(r->tok, text, len, ids, n, &err);
    free(owned);
    if (st == HET_OK) return true;
    het_api_error_set(e, 400, "invalid_request_error", NULL, req->kind == HET_API_CHAT ? "messages" : "prompt",
                      "cannot tokenize the prompt: %s", err.msg);
    return false;
oom:
    het_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return false;
}

static bool choose_route(const het_server *s, const struct het_api_request *req, struct plan *pl,
                         struct het_api_error *e)
{
    int32_t want = req->max_tokens > 0 ? req->max_tokens : s->p.default_max_tokens;
    if (req->route < 0) {
        pl->route = het_route_choose(&s->rule, pl->n, want, pl->reason, sizeof pl->reason);
        return true;
    }
    if (req->route >= s->n_routes) {
        het_api_error_set(e, 400, "invalid_request_error", NULL, "het_route",
                          "this server has no long route (start it with --long-model)");
        return false;
    }
    pl->route = req->route;
    snprintf(pl->reason, sizeof pl->reason, "requested with het_route");
    return true;
}

/* tokens, route and max_tokens for a request, or the error to answer */
static bool plan_request(const het_server *s, const struct het_api_request *req, struct plan *pl,
                         struct het_api_error *e)
{
    const char *pparam = req->kind == HET_API_CHAT ? "messages" : "prompt";
    if (!model_known(s, req->model)) {
        het_api_error_set(e, 404, "invalid_request_error", "model_not_found", "model",
                          "the model '%.200s' does not exist (see GET /v1/models)", req->model);
        return false;
    }
    if (!tokenize_for(s, 0, req, &pl->tokens, &pl->n, e) || !choose_route(s, req, pl, e)) return false;
    const struct het_serve_route_state *r = &s->routes[pl->route];
    if (r->model != s->routes[0].model && !req->prompt_tokens) {
        free(pl->tokens);
        pl->tokens = NULL;
        if (!tokenize_for(s, pl->route, req, &pl->tokens, &pl->n, e)) return false;
    }
    if (pl->n == 0) {
        het_api_error_set(e, 400, "invalid_request_error", NULL, pparam, "the prompt is empty");
        return false;
    }
    if (pl->n >= r->n_ctx) {
        het_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", pparam,
                          "the prompt has %d tokens; the context of %s holds %d", pl->n, r->id, r->n_ctx);
        return false;
    }
    for (int i = 0; i < req->n_logit_bias; i++)
        if (req->logit_bias[i].token >= het_model_get_config(r->model)->n_vocab) {
            het_api_error_set(e, 400, "invalid_request_error", NULL, "logit_bias",
                              "logit_bias: token %d is not in the vocabulary of %s (0..%d)", req->logit_bias[i].token,
                              r->id, het_model_get_config(r->model)->n_vocab - 1);
            return false;
        }
    int32_t room = r->n_ctx - pl->n;
    int32_t dflt = s->p.default_max_tokens < room ? s->p.default_max_tokens : room;
    pl->max_tokens = req->max_tokens > 0 ? req->max_tokens : dflt;
    if (pl->max_tokens > room) {
        het_api_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "max_tokens",
                          "prompt of %d tokens + max_tokens %d exceed the context of %d tokens of %s", pl->n,
                          pl->max_tokens, r->n_ctx, r->id);
        return false;
    }
    return true;
}

/* queue one job (choice k of req->n; each choice gets its own seed) */
static bool submit(het_server *s, const struct het_api_request *req, const struct plan *pl, uint64_t id, int k,
                   het_job **job, struct het_api_error *e)
{
    bool pen = req->repeat_last_n != 0; /* llama.cpp: repeat_last_n 0 turns the penalties off */
    uint64_t seed = req->has_seed ? req->seed : (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull + id;
    struct het_job_params jp = {
        .prompt = pl->tokens, .n_prompt = pl->n, .max_tokens = pl->max_tokens,
        .sampling = { .temp = req->temperature, .top_k = req->top_k, .top_p = req->top_p,
                      .seed = seed + (uint64_t)k * 0x9E3779B97F4A7C15ull,
                      .min_p = req->min_p, .repeat_penalty = pen ? req->repeat_penalty : 1.0f,
                      .presence_penalty = pen ? req->presence_penalty : 0,
                      .frequency_penalty = pen ? req->frequency_penalty : 0, .penalty_last_n = req->repeat_last_n,
                      .logit_bias = req->logit_bias, .n_logit_bias = req->n_logit_bias,
                      .json_object = req->json_object, .tok = s->routes[pl->route].tok },
        .stop = req->stop, .n_stop = req->n_stop, .ignore_eos = req->ignore_eos,
        .logprobs = req->logprobs, .top_logprobs = req->top_logprobs,
    };
    char msg[256];
    switch (het_batcher_submit(s->routes[pl->route].batcher, &jp, job, msg, sizeof msg)) {
    case HET_SUBMIT_OK: return true;
    case HET_SUBMIT_FULL:
        het_metrics_reject(&s->metrics, HET_REJECT_QUEUE_FULL);
        het_api_error_set(e, 503, "server_error", "queue_full", NULL, "the server is busy: %s; retry later", msg);
        return false;
    case HET_SUBMIT_INVALID:
        het_api_error_set(e, 400, "invalid_request_error", NULL, req->kind == HET_API_CHAT ? "messages" : "prompt",
                          "%s", msg);
        return false;
    case HET_SUBMIT_STOPPED:
        het_api_error_set(e, 503, "server_error", "shutting_down", NULL, "%s", msg);
        return false;
    case HET_SUBMIT_NOMEM: break;
    }
    het_api_error_set(e, 500, "server_error", NULL, NULL, "%s", msg);
    return false;
}

/* ---- one request's identity, route and choices, shared by both answer styles ---------- */

struct choice {
    het_job              *job;
    struct het_strbuf     text;   /* whole: all of it; stream: what one wait brought */
    struct het_job_tokens toks;   /* logprobs, likewise                              */
    size_t                have;
    struct het_job_info   ji;
    bool                  ended;  /* stream: its last chunk is out                  */
};

struct answer {
    het_server               *s;
    struct het_access         acc;
    struct MHD_Connection    *c;
    int                       route;
    enum het_api_kind         kind;
    bool                      include_usage;
    bool                      logprobs;
    char                      id[48];
    long long                 created;
    char                      reason[200];
    struct het_route_headers  headers;
    struct het_api_route_info info;
    int                       n;       /* choices */
    struct choice             ch[HET_API_MAX_N];
};

static void answer_init(struct answer *a, het_server *s, struct MHD_Connection *c, const struct het_api_request *req,
                        const struct plan *pl, uint64_t id)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    a->c = c;
    a->route = pl->route;
    a->kind = req->kind;
    a->include_usage = req->include_usage;
    a->logprobs = req->logprobs;
    snprintf(a->id, sizeof a->id, "%s-%llu", req->kind == HET_API_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)id);
    a->created = (long long)time(NULL);
    snprintf(a->reason, sizeof a->reason, "%s", pl->reason);
    const struct het_serve_route_state *r = &s->routes[pl->route];
    const char *route = het_route_name((enum het_route_id)pl->route);
    a->headers = (struct het_route_headers){ r->id, r->devices, route };
    a->info = (struct het_api_route_info){ route, r->id, r->devices, a->reason,
                                           s->rule.has_long ? s->rule.threshold : -1 };
}

static void result_from(const struct answer *a, int k, const char *text, size_t len, struct het_api_result *res)
{
    const struct het_job_info *ji = &a->ch[k].ji;
    *res = (struct het_api_result){
        .index = k, .id = a->id, .created = a->created, .model = a->headers.model, .text = text, .len = len,
        .finish = ji->finish == HET_FINISH_NONE ? NULL : het_finish_name(ji->finish),
        .prompt_tokens = ji->n_prompt, .completion_tokens = ji->n_gen, .cached_tokens = ji->n_cached,
        .ttft_ms = ji->ttft_ms, .decode_ms = ji->decode_ms,
    };
}

/* The api's view of job tokens: each token's and alternative's text. */
struct lp_view {
    struct het_api_token   *t;
    struct het_api_logprob *alt;
    char                   *text;   /* every text, concatenated */
    int                     n;
};

static float finite_lp(float x) { return x > -9999.0f ? x : -9999.0f; }

static bool lp_view_build(const struct het_serve_route_state *r, const struct het_job_tokens *jt, struct lp_view *v)
{
    size_t n_alt = 0;
    for (size_t i = 0; i < jt->n; i++) n_alt += (size_t)jt->v[i].n_top;
    size_t n_text = jt->n + n_alt;
    v->n = (int)jt->n;
    v->t = calloc(jt->n + 1, sizeof *v->t);
    v->alt = calloc(n_alt + 1, sizeof *v->alt);
    v->text = malloc(n_text * 256 + 1);
    if (!v->t || !v->alt || !v->text) return false;
    char *p = v->text;
    size_t k = 0;
    for (size_t i = 0; i < jt->n; i++) {
        const struct het_job_token *jt_i = &jt->v[i];
        struct het_api_token *t = &v->t[i];
        int len = het_token_to_piece(r->tok, jt_i->id, p, 256, false);
        t->tok = (struct het_api_logprob){ p, len > 0 ? (size_t)len : 0, finite_lp(jt_i->logprob) };
        p += t->tok.len;
        t->offset = jt_i->start;
        t->top = &v->alt[k];
        t->n_top = jt_i->n_top;
        for (int a = 0; a < jt_i->n_top; a++, k++) {
            len = het_token_to_piece(r->tok, jt_i->top[a].token, p, 256, false);
            v->alt[k] = (struct het_api_logprob){ p, len > 0 ? (size_t)len : 0, finite_lp(jt_i->top[a].logprob) };
            p += v->alt[k].len;
        }
    }
    return true;
}

static void lp_view_free(struct lp_view *v)
{
    free(v->t);
    free(v->alt);
    free(v->text);
    memset(v, 0, sizeof *v);
}

/* every choice ends: metrics, the access-log counts, the jobs released */
static void answer_done(struct answer *a)
{
    a->acc.prompt_tokens = a->ch[0].ji.n_prompt;
    a->acc.cached_tokens = a->ch[0].ji.n_cached;
    a->acc.completion_tokens = 0;
    for (int k = 0; k < a->n; k++) {
        struct choice *c = &a->ch[k];
        a->acc.completion_tokens += c->ji.n_gen;
        if (c->job) {
            if (c->ji.finish == HET_FINISH_NONE) c->ji.finish = HET_FINISH_CANCELLED;
            het_metrics_request(&a->s->metrics, a->route, &c->ji);
            het_job_release(c->job);
            c->job = NULL;
        }
        het_strbuf_free(&c->text);
        het_job_tokens_free(&c->toks);
    }
}

/* ---- whole answers ----------------------------------------------------------------------- */

static int answer_whole(struct answer *a)
{
    for (int k = 0; k < a->n; k++) {
        struct choice *c = &a->ch[k];
        while (!het_job_wait(c->job, &c->text, &c->have, a->logprobs ? &c->toks : NULL, WAIT_SLICE_MS, &c->ji))
            if (het_server_client_gone(a->c)) {
                answer_done(a);
                return MHD_NO;
            }
    }
    struct lp_view lv[HET_API_MAX_N];
    struct het_api_result res[HET_API_MAX_N];
    memset(lv, 0, sizeof lv);
    const char *failed = NULL;
    for (int k = 0; k < a->n && !failed; k++) {
        struct choice *c = &a->ch[k];
        if (c->text.oom || c->toks.oom || (a->logprobs && !lp_view_build(&a->s->routes[a->route], &c->toks, &lv[k])))
            failed = "out of memory";
        else if (c->ji.finish == HET_FINISH_ERROR)
            failed = c->ji.error;
        result_from(a, k, c->text.p ? c->text.p : "", c->text.len, &res[k]);
        res[k].logprobs = a->logprobs;
        res[k].tokens = lv[k].t;
        res[k].n_tokens = lv[k].n;
    }
    int ret;
    if (failed) {
        struct het_api_error e;
        het_api_error_set(&e, 500, "server_error", NULL, NULL, "generation failed: %s", failed);
        ret = het_server_send_error(a->s, a->c, &e, &a->headers);
    } else {
        size_t len = 0;
        char *body = het_api_response_json_n(a->kind, res, a->n, &a->info, &len);
        ret = het_server_send(a->s, a->c, 200, "application/json", body, len, &a->headers);
    }
    answer_done(a);
    for (int k = 0; k < a->n; k++) lp_view_free(&lv[k]);
    return ret;
}

/* ---- streams ------------------------------------------------------------------------------ */

struct stream {
    struct answer     a;
    struct het_strbuf out;      /* bytes ready to send   */
    size_t            out_off;
    bool              started, done;
    double            quiet_ms;   /* waited since the last bytes went out */
};

/* While a long prompt is read nothing is sent; an SSE comment every so often
 * keeps the connection from looking idle (to the server's own idle timeout
 * and to proxies). Clients ignore comment lines. */
static double keepalive_ms(const het_server *s)
{
    double ms = s->p.idle_timeout_s * 1000.0 / 3;
    return ms < 15000 ? ms : 15000;
}

static void sse(struct stream *st, char *json)
{
    if (!json) {
        st->out.oom = true;
        return;
    }
    het_strbuf_puts(&st->out, "data: ");
    het_strbuf_puts(&st->out, json);
    het_strbuf_puts(&st->out, "\n\n");
    free(json);
}

/* a chunk of choice k: its new text (and tokens), its opening, or its end */
static void stream_chunk(struct stream *st, int k, bool first, bool last)
{
    struct choice *c = &st->a.ch[k];
    struct het_api_result res;
    struct lp_view lv = { 0 };
    result_from(&st->a, k, c->text.p ? c->text.p : "", first || last ? 0 : c->text.len, &res);
    if (!last) res.finish = NULL;
    if (st->a.logprobs && !first && !last) {
        if (!lp_view_build(&st->a.s->routes[st->a.route], &c->toks, &lv)) st->out.oom = true;
        res.logprobs = true;
        res.tokens = lv.t;
        res.n_tokens = lv.n;
    }
    bool all_ended = true; /* the het object goes in the first chunk and the very last */
    for (int i = 0; i < st->a.n; i++) all_ended = all_ended && st->a.ch[i].ended;
    bool ri = (first && k == 0) || (last && all_ended);
    sse(st, het_api_chunk_json(st->a.kind, &res, first, false, ri ? &st->a.info : NULL, NULL));
    lp_view_free(&lv);
    c->toks.n = 0;
}

/* the usage chunk: the prompt once, every choice's completion tokens */
static void stream_usage(struct stream *st)
{
    struct het_api_result res;
    result_from(&st->a, 0, "", 0, &res);
    for (int k = 1; k < st->a.n; k++) res.completion_tokens += st->a.ch[k].ji.n_gen;
    sse(st, het_api_chunk_json(st->a.kind, &res, false, true, NULL, NULL));
}

static void stream_error(struct stream *st, const char *why)
{
    struct het_api_error e;
    het_api_error_set(&e, 500, "server_error", NULL, NULL, "generation failed: %s", why);
    sse(st, het_api_error_json(&e, NULL));
}

/* fill st->out with the next events; false: the client is gone */
static bool stream_produce(struct stream *st)
{
    struct answer *a = &st->a;
    if (!st->started) {
        st->started = true;
        for (int k = 0; k < a->n; k++) stream_chunk(st, k, true, false);
        return true;
    }
    /* every running choice without waiting; when none had news, wait on the first */
    bool news = false;
    for (int pass = 0; pass < 2 && !news && !st->done; pass++) {
        bool waited = false;
        for (int k = 0; k < a->n; k++) {
            struct choice *c = &a->ch[k];
            if (c->ended) continue;
            int ms = pass == 1 && !waited ? WAIT_SLICE_MS : 0;
            waited = true;
            het_strbuf_clear(&c->text);
            bool finished = het_job_wait(c->job, &c->text, &c->have, a->logprobs ? &c->toks : NULL, ms, &c->ji);
            if (c->toks.oom) st->out.oom = true;
            if (c->text.len || c->toks.n) stream_chunk(st, k, false, false);
            if (finished) {
                c->ended = true;
                if (c->ji.finish == HET_FINISH_ERROR) {
                    stream_error(st, c->ji.error);
                    het_strbuf_puts(&st->out, "data: [DONE]\n\n");
                    st->done = true;
                    break;
                }
                stream_chunk(st, k, false, true);
            }
            if (ms) break; /* waited: look at the others again */
        }
        news = st->out.len > 0;
        if (!st->done) {
            bool all = true;
            for (int k = 0; k < a->n; k++) all = all && a->ch[k].ended;
            if (all) {
                if (a->include_usage) stream_usage(st);
                het_strbuf_puts(&st->out, "data: [DONE]\n\n");
                st->done = true;
            }
        }
    }
    if (st->out.len) {
        st->quiet_ms = 0;
        return true;
    }
    if (het_server_client_gone(a->c)) return false;
    if ((st->quiet_ms += WAIT_SLICE_MS) >= keepalive_ms(a->s)) {
        het_strbuf_puts(&st->out, ": keep-alive\n\n");
        st->quiet_ms = 0;
    }
    return true;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream *st = cls;
    while (st->out_off == st->out.len) {
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        het_strbuf_clear(&st->out);
        st->out_off = 0;
        if (!stream_produce(st) || st->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = st->out.len - st->out_off < max ? st->out.len - st->out_off : max;
    memcpy(buf, st->out.p + st->out_off, n);
    st->out_off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    struct stream *st = cls;
    answer_done(&st->a);
    het_server_access_log(st->a.s, &st->a.acc, 200);
    het_strbuf_free(&st->out);
    free(st);
}

static int answer_stream(struct answer *a)
{
    struct stream *st = calloc(1, sizeof *st);
    struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st,
                                                                    stream_free)
                                : NULL;
    if (!r) {
        for (int k = 0; k < a->n; k++) a->ch[k].ji.finish = HET_FINISH_ERROR;
        answer_done(a);
        free(st);
        return het_server_send(a->s, a->c, 500, "application/json", NULL, 0, NULL);
    }
    st->a = *a;
    st->a.info.reason = st->a.reason; /* it pointed into *a */
    a->acc.deferred = true;           /* the stream writes the access line when it ends */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "x-het-model", a->headers.model);
    MHD_add_response_header(r, "x-het-devices", a->headers.devices);
    MHD_add_response_header(r, "x-het-route", a->headers.route);
    enum MHD_Result ret = MHD_queue_response(a->c, 200, r);
    MHD_destroy_response(r);   /* the stream is freed with the response (stream_free) */
    het_metrics_http(&a->s->metrics, 200);
    return ret;
}

int het_serve_generate(het_server *s, struct MHD_Connection *c, enum het_api_kind kind, const char *body, size_t len,
                       struct het_access *acc)
{
    struct het_api_request req;
    struct het_api_error e;
    struct plan pl = { 0 };
    uint64_t id = het_server_next_id(s);
    struct answer *a = calloc(1, sizeof *a);
    int ret;
    bool ok = a && het_api_parse(body, len, kind, &req, &e) && plan_request(s, &req, &pl, &e);
    if (!a) het_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
    if (ok) {
        answer_init(a, s, c, &req, &pl, id);
        a->acc = *acc;
        for (int k = 0; ok && k < req.n; k++, a->n++) ok = submit(s, &req, &pl, id, k, &a->ch[k].job, &e);
        if (!ok) { /* a choice could not be queued: the others go too */
            for (int k = 0; k < a->n; k++) het_job_release(a->ch[k].job);
            a->n = 0;
        }
    }
    if (a && req.user) snprintf(acc->user, sizeof acc->user, "%s", req.user);
    if (!ok) {
        const struct het_serve_route_state *r = &s->routes[pl.route];
        struct het_route_headers h = { r->id, r->devices, het_route_name((enum het_route_id)pl.route) };
        ret = het_server_send_error(s, c, &e, pl.tokens ? &h : NULL);
    } else {
        snprintf(a->acc.user, sizeof a->acc.user, "%s", acc->user);
        ret = req.stream ? answer_stream(a) : answer_whole(a);
        *acc = a->acc;
    }
    free(pl.tokens);
    if (a) het_api_request_free(&req);
    free(a);
    return ret;
}

#endif
