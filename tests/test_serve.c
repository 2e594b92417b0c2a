/*
 * test_serve.c — the server's pieces without HTTP: UTF-8 hold-back and
 * repair, chat templates, the routing rule and threshold derivation,
 * request validation (each malformed field named in the error), metrics
 * text, and the continuous-batching engine on stories260K: concurrent greedy
 * jobs give exactly the text each gives alone, stop strings, a full queue,
 * cancellation, and jobs ended cleanly when the engine stops.
 */
#include "het/serve.h"
#include "serve/api.h"
#include "serve/batcher.h"
#include "serve/metrics.h"
#include "serve/utf8.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void test_utf8(void)
{
    static const struct { const char *s; bool valid; size_t tail; } cases[] = {
        { "abc", true, 0 },          { "\xC3\xA9", true, 0 },      { "\xC3", false, 1 },
        { "a\xE2\x82", false, 2 },   { "\xE2\x82\xAC", true, 0 },  { "\xF0\x9F\x98", false, 3 },
        { "\xF0\x9F\x98\x80", true, 0 }, { "a\x80", false, 0 },    { "\xED\xA0\x80", false, 0 },
        { "\xC0\xAF", false, 0 },    { "\xF5\x80\x80\x80", false, 0 }, { "\xE0\x80", false, 0 },
        { "\xFF", false, 0 },        { "", true, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = strlen(cases[i].s);
        CHECK(het_utf8_valid(cases[i].s, n) == cases[i].valid, "valid case %zu", i);
        CHECK(het_utf8_incomplete_tail(cases[i].s, n) == cases[i].tail, "tail case %zu: %zu", i,
              het_utf8_incomplete_tail(cases[i].s, n));
    }
    struct het_strbuf b = { 0 };
    het_utf8_sanitize(&b, "a\xFF" "b\xC3", 4);
    CHECK(b.len == 8 && !memcmp(b.p, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD", 8), "sanitize");
    CHECK(het_utf8_valid(b.p, b.len), "sanitized text is valid");
    het_strbuf_free(&b);
}

static void check_render(enum het_chat_format f, const struct het_chat_msg *m, int n, const char *want)
{
    size_t len = 0;
    char *got = het_chat_render(f, m, n, &len);
    CHECK(got && len == strlen(want) && !strcmp(got, want), "%s:\n got [%s]\nwant [%s]", het_chat_format_name(f),
          got ? got : "(null)", want);
    free(got);
}

#define MSG(r, c) { r, c, sizeof c - 1 }

static void test_chat_templates(void)
{
    CHECK(het_chat_format_detect(NULL) == HET_CHAT_PLAIN, "no template");
    CHECK(het_chat_format_detect("{% for m in messages %}<|im_start|>{{m.role}}") == HET_CHAT_CHATML, "chatml");
    CHECK(het_chat_format_detect("<|start_header_id|>' + message['role']") == HET_CHAT_LLAMA3, "llama3");
    CHECK(het_chat_format_detect("{{ bos_token + '[INST] ' + content }}") == HET_CHAT_LLAMA2, "llama2");
    CHECK(het_chat_format_detect("{{ messages }}") == HET_CHAT_PLAIN, "unknown");
    const struct het_chat_msg conv[] = {
        MSG("system", "Be brief."), MSG("user", "Hi"), MSG("assistant", "Hello."), MSG("user", "Why?"),
    };
    check_render(HET_CHAT_CHATML, conv, 4,
                 "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                 "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(HET_CHAT_LLAMA3, conv, 4,
                 "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_render(HET_CHAT_LLAMA2, conv, 4,
                 "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Why? [/INST]");
    check_render(HET_CHAT_PLAIN, conv, 4, "Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Why?\nAssistant:");
    CHECK(het_chat_render(HET_CHAT_CHATML, conv, 0, NULL) == NULL, "no messages");
}

static void test_route(void)
{
    struct het_route_rule r = { .has_long = true, .threshold = 100, .n_ctx_default = 512, .n_ctx_long = 8192 };
    char why[200];
    CHECK(het_route_choose(&r, 99, 16, why, sizeof why) == HET_ROUTE_DEFAULT, "below: %s", why);
    CHECK(strstr(why, "99") && strstr(why, "100"), "reason names the numbers: %s", why);
    CHECK(het_route_choose(&r, 100, 16, why, sizeof why) == HET_ROUTE_LONG, "at threshold: %s", why);
    CHECK(het_route_choose(&r, 50, 500, why, sizeof why) == HET_ROUTE_LONG && strstr(why, "context"),
          "does not fit the default context: %s", why);
    r.has_long = false;
    CHECK(het_route_choose(&r, 5000, 16, why, sizeof why) == HET_ROUTE_DEFAULT, "single route");
    /* default: cheap start, 1 ms/token; long: 40 ms start, 0.5 ms/token; the
     * long one must win by 10%: 40 + 0.5 n < 0.9 n from n = 101 */
    struct het_route_cost d = { 0, 1.0, 0, 0 }, l = { 40, 0.5, 0, 0 };
    CHECK(het_route_derive_threshold(&d, &l, 0, 10000) == 101, "crossover %d",
          het_route_derive_threshold(&d, &l, 0, 10000));
    CHECK(het_route_derive_threshold(&d, &d, 16, 1000) == 1001, "equal routes: stay on the default");
    CHECK(het_route_derive_threshold(&l, &d, 0, 1000) == 1, "long always cheaper");
    struct het_route_cost slow = { 100, 2.0, 1, 0 };
    CHECK(het_route_derive_threshold(&d, &slow, 16, 1000) == 1001, "never cheaper");
    /* decode cost grows with the cache: m steps at depths n..n+m-1 */
    struct het_route_cost dc = { 0, 0, 1, 0.5 };
    CHECK(het_route_cost_ms(&dc, 10, 3) == 3 + 0.5 * (10 + 11 + 12), "decode cost %g", het_route_cost_ms(&dc, 10, 3));
}

#ifdef HET_HAVE_JANSSON
static void expect_bad(enum het_api_kind kind, const char *body, int status, const char *param)
{
    size_t len = strlen(body);
    struct het_api_request r;
    struct het_api_error e = { 0 };
    bool ok = het_api_parse(body, len, kind, &r, &e);
    CHECK(!ok && e.status == status && !strcmp(e.param, param), "%s -> ok %d status %d param '%s' (%s)", body, ok,
          e.status, e.param, e.message);
    if (!ok) {
        char *j = het_api_error_json(&e, NULL);
        CHECK(j && strstr(j, "\"error\":{\"message\":") && strstr(j, "\"type\":") && strstr(j, "\"code\":"),
              "error object %s", j ? j : "(null)");
        free(j);
    }
    het_api_request_free(&r);
}

static void test_api(void)
{
    const enum het_api_kind C = HET_API_COMPLETION, H = HET_API_CHAT;
    expect_bad(C, "{", 400, "");
    expect_bad(C, "[1,2]", 400, "");
    expect_bad(C, "\"x\"", 400, "");
    expect_bad(C, "{\"prompt\":\"a\xff\"}", 400, "");
    expect_bad(C, "{}", 400, "prompt");
    expect_bad(C, "{\"prompt\":5}", 400, "prompt");
    expect_bad(C, "{\"prompt\":[1,\"a\"]}", 400, "prompt[1]");
    expect_bad(C, "{\"prompt\":[\"a\",\"b\"]}", 400, "prompt");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":\"9\"}", 400, "max_tokens");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":0}", 400, "max_tokens");
    expect_bad(C, "{\"prompt\":\"a\",\"max_tokens\":1.5}", 400, "max_tokens");
    expect_bad(C, "{\"prompt\":\"a\",\"temperature\":3}", 400, "temperature");
    expect_bad(C, "{\"prompt\":\"a\",\"temperature\":\"hot\"}", 400, "temperature");
    expect_bad(C, "{\"prompt\":\"a\",\"top_p\":-1}", 400, "top_p");
    expect_bad(C, "{\"prompt\":\"a\",\"seed\":\"x\"}", 400, "seed");
    expect_bad(C, "{\"prompt\":\"a\",\"stream\":1}", 400, "stream");
    expect_bad(C, "{\"prompt\":\"a\",\"stop\":[1]}", 400, "stop[0]");
    expect_bad(C, "{\"prompt\":\"a\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", 400, "stop");
    expect_bad(C, "{\"prompt\":\"a\",\"n\":17}", 400, "n");
    expect_bad(C, "{\"prompt\":\"a\",\"n\":0}", 400, "n");
    expect_bad(C, "{\"prompt\":\"a\",\"model\":7}", 400, "model");
    expect_bad(C, "{\"prompt\":\"a\",\"stream_options\":{\"include_usage\":3}}", 400,
               "stream_options.include_usage");
    expect_bad(H, "{\"messages\":[]}", 400, "messages");
    expect_bad(H, "{\"messages\":{}}", 400, "messages");
    expect_bad(H, "{\"messages\":[5]}", 400, "messages[0]");
    expect_bad(H, "{\"messages\":[{\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_bad(H, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"x\"}]}", 400, "messages[0].role");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":7}]}", 400, "messages[0].content");
    expect_bad(H, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
               "messages[0].content");
    /* no field is silently ignored: unknown or unsupported ones are named */
#define M "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
    expect_bad(H, M "\"frobnicate\":1}", 400, "frobnicate");
    expect_bad(H, M "\"mirostat\":2}", 400, "mirostat");
    expect_bad(C, "{\"prompt\":\"a\",\"top_logprobs\":2}", 400, "top_logprobs"); /* chat only */
    expect_bad(H, M "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", 400, "tools");
    expect_bad(H, M "\"tool_choice\":\"auto\"}", 400, "tool_choice");
    expect_bad(H, M "\"functions\":[{}]}", 400, "functions");
    expect_bad(H, M "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}", 400,
               "response_format.type");
    expect_bad(H, M "\"response_format\":{\"type\":\"json_object\",\"schema\":{}}}", 400,
               "response_format.schema");
    expect_bad(H, M "\"response_format\":\"json\"}", 400, "response_format");
    expect_bad(H, M "\"top_logprobs\":3}", 400, "top_logprobs");
    expect_bad(H, M "\"logprobs\":true,\"top_logprobs\":21}", 400, "top_logprobs");
    expect_bad(H, M "\"logprobs\":2}", 400, "logprobs");
    expect_bad(C, "{\"prompt\":\"a\",\"logprobs\":6}", 400, "logprobs");
    expect_bad(C, "{\"prompt\":\"a\",\"logprobs\":true}", 400, "logprobs");
    expect_bad(H, M "\"presence_penalty\":2.5}", 400, "presence_penalty");
    expect_bad(H, M "\"frequency_penalty\":\"x\"}", 400, "frequency_penalty");
    expect_bad(H, M "\"repeat_penalty\":-1}", 400, "repeat_penalty");
    expect_bad(H, M "\"repeat_last_n\":-2}", 400, "repeat_last_n");
    expect_bad(H, M "\"min_p\":1.5}", 400, "min_p");
    expect_bad(H, M "\"logit_bias\":{\"abc\":1}}", 400, "logit_bias");
    expect_bad(H, M "\"logit_bias\":{\"5\":101}}", 400, "logit_bias");
    expect_bad(H, M "\"logit_bias\":[1]}", 400, "logit_bias");
    expect_bad(H, M "\"stream_options\":{\"include_usage\":true,\"extra\":1}}", 400, "stream_options.extra");
    expect_bad(H, M "\"user\":5}", 400, "user");
    expect_bad(C, "{\"prompt\":\"a\",\"echo\":true}", 400, "echo");
    expect_bad(C, "{\"prompt\":\"a\",\"best_of\":2}", 400, "best_of");
    expect_bad(C, "{\"prompt\":\"a\",\"suffix\":\"end\"}", 400, "suffix");
    expect_bad(C, "{\"prompt\":\"a\",\"messages\":[]}", 400, "messages");
#undef M

    /* a good request: content parts joined, every supported field read */
    const char *good = "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"sys\"},{\"role\":\"user\","
                       "\"content\":[{\"type\":\"text\",\"text\":\"he\"},{\"type\":\"text\",\"text\":\"llo\"}]}],"
                       "\"max_completion_tokens\":7,\"stop\":\"\\n\",\"seed\":-1,\"logprobs\":true,\"top_logprobs\":3,"
                       "\"presence_penalty\":0.5,\"frequency_penalty\":-0.25,\"repeat_penalty\":1.1,\"repeat_last_n\":-1,"
                       "\"min_p\":0.05,\"logit_bias\":{\"12\":-100,\"7\":2.5},\"response_format\":{\"type\":\"json_object\"},"
                       "\"user\":\"u1\",\"tools\":[],\"tool_choice\":\"none\",\"n\":1,\"stream_options\":{\"include_usage\":true}}";
    struct het_api_request r;
    struct het_api_error e;
    CHECK(het_api_parse(good, strlen(good), H, &r, &e), "good request refused: %s", e.message);
    CHECK(r.n_msgs == 2 && !strcmp(r.msgs[0].role, "system") && r.msgs[1].len == 5 &&
              !memcmp(r.msgs[1].content, "hello", 5), "messages parsed");
    CHECK(r.max_tokens == 7 && r.n_stop == 1 && !strcmp(r.stop[0], "\n") && r.has_seed && r.temperature == 1.0f &&
              !strcmp(r.model, "m") && r.route == -1, "fields parsed");
    CHECK(r.logprobs && r.top_logprobs == 3 && r.presence_penalty == 0.5f && r.frequency_penalty == -0.25f &&
              r.repeat_penalty == 1.1f && r.repeat_last_n == -1 && r.min_p == 0.05f && r.json_object &&
              r.include_usage && !strcmp(r.user, "u1"), "sampling fields parsed");
    CHECK(r.n_logit_bias == 2 && ((r.logit_bias[0].token == 12 && r.logit_bias[0].bias == -100) ||
                                  (r.logit_bias[1].token == 12 && r.logit_bias[1].bias == -100)), "logit_bias parsed");
    het_api_request_free(&r);
    const char *cl = "{\"prompt\":\"a\",\"logprobs\":2,\"echo\":false,\"best_of\":1,\"suffix\":\"\"}";
    CHECK(het_api_parse(cl, strlen(cl), C, &r, &e) && r.logprobs && r.top_logprobs == 2 && r.repeat_last_n == 64 &&
              r.repeat_penalty == 1.0f, "completions logprobs: %s", e.message);
    het_api_request_free(&r);

    /* logprobs in both shapes */
    const struct het_api_logprob alts[2] = { { "ok", 2, -0.1f }, { "no", 2, -2.5f } };
    const struct het_api_token toks[1] = { { { "ok", 2, -0.1f }, alts, 2, 0 } };
    struct het_api_result lr = { .id = "x", .created = 1, .model = "m", .text = "ok", .len = 2, .finish = "length",
                                 .completion_tokens = 1, .logprobs = true, .tokens = toks, .n_tokens = 1 };
    char *cj = het_api_response_json(H, &lr, NULL, NULL);
    CHECK(cj && strstr(cj, "\"logprobs\":{\"content\":[{\"token\":\"ok\",\"logprob\":-0.1") &&
              strstr(cj, "\"bytes\":[111,107]") && strstr(cj, "\"top_logprobs\":[{\"token\":\"ok\"") &&
              strstr(cj, "{\"token\":\"no\",\"logprob\":-2.5"), "chat logprobs %s", cj ? cj : "(null)");
    free(cj);
    char *tj = het_api_response_json(C, &lr, NULL, NULL);
    CHECK(tj && strstr(tj, "\"tokens\":[\"ok\"]") && strstr(tj, "\"token_logprobs\":[-0.1") &&
              strstr(tj, "\"top_logprobs\":[{\"ok\":-0.1") && strstr(tj, "\"text_offset\":[0]"),
          "completion logprobs %s", tj ? tj : "(null)");
    free(tj);

    struct het_api_result res = { .id = "cmpl-1", .created = 1, .model = "m", .text = "ok\xff", .len = 3,
                                  .finish = "stop", .prompt_tokens = 3, .completion_tokens = 2 };
    struct het_api_route_info ri = { "long", "m", "cpu", "because", 100 };
    char *j = het_api_response_json(C, &res, &ri, NULL);
    CHECK(j && strstr(j, "\"text\":\"ok\xEF\xBF\xBD\"") && strstr(j, "\"total_tokens\":5") &&
              strstr(j, "\"het\":{") && strstr(j, "\"threshold\":100"), "response %s", j ? j : "(null)");
    free(j);
}
#endif

static void test_metrics(void)
{
    struct het_metrics m;
    het_metrics_init(&m);
    struct het_job_info ji = { .finish = HET_FINISH_LENGTH, .n_prompt = 7, .n_gen = 11, .ttft_ms = 30,
                               .decode_ms = 100 };
    het_metrics_request(&m, 0, &ji);
    het_metrics_http(&m, 200);
    het_metrics_http(&m, 400);
    het_metrics_reject(&m, HET_REJECT_QUEUE_FULL);
    struct het_metrics_route mr[1] = { { "default", "stories", { .queued = 2, .active = 1, .n_parallel = 4,
                                                                 .n_devices = 1, .device_name = { "cpu" },
                                                                 .device_busy_us = { 1500000 } } } };
    struct het_strbuf b = { 0 };
    het_metrics_render(&m, &b, mr, 1, 0, false, 3);
    static const char *const want[] = {
        "het_requests_total{route=\"default\",model=\"stories\",finish=\"length\"} 1\n",
        "het_prompt_tokens_total{route=\"default\"} 7\n",
        "het_completion_tokens_total{route=\"default\"} 11\n",
        "het_time_to_first_token_seconds_bucket{route=\"default\",le=\"0.025\"} 0\n",
        "het_time_to_first_token_seconds_bucket{route=\"default\",le=\"0.05\"} 1\n",
        "het_decode_tokens_per_second_bucket{route=\"default\",le=\"100\"} 1\n",
        "het_decode_tokens_per_second_count{route=\"default\"} 1\n",
        "het_http_responses_total{code=\"400\"} 1\n",
        "het_rejected_total{reason=\"queue_full\"} 1\n",
        "het_queue_depth{route=\"default\"} 2\n",
        "het_device_busy_seconds_total{route=\"default\",device=\"cpu\"} 1.500000\n",
        "het_open_connections 3\n",
        "# TYPE het_time_to_first_token_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(b.p && strstr(b.p, want[i]), "metrics lack %s", want[i]);
    het_strbuf_free(&b);
    het_metrics_free(&m);
}

/* ---- the engine ------------------------------------------------------------------ */

struct rig {
    het_device  *cpu;
    het_sched   *sched;
    het_batcher *b;
};

/* an engine of n_par slots on one CPU thread, not started yet (jobs
 * submitted now are admitted together) */
static bool rig_open_stopped(struct rig *r, het_model *m, int n_par, int max_queue, int batch_tokens)
{
    het_error err = { 0 };
    memset(r, 0, sizeof *r);
    r->cpu = het_cpu_device_init(1, &err);
    struct het_sched_params sp = { .devices = &r->cpu, .n_devices = 1 };
    r->sched = het_sched_init(&sp, &err);
    struct het_batcher_params bp = { .model = m, .sched = r->sched, .n_ctx = 256, .n_parallel = n_par,
                                     .batch_tokens = batch_tokens, .max_queue = max_queue };
    r->b = r->sched ? het_batcher_init(&bp, &err) : NULL;
    CHECK(r->b, "engine: %s", err.msg);
    return r->b != NULL;
}

static bool rig_open(struct rig *r, het_model *m, int n_par, int max_queue, int batch_tokens)
{
    if (!rig_open_stopped(r, m, n_par, max_queue, batch_tokens)) return false;
    het_error err = { 0 };
    const bool ok = het_batcher_start(r->b, &err) == HET_OK;
    CHECK(ok, "engine: %s", err.msg);
    return ok;
}

static void rig_close(struct rig *r)
{
    het_batcher_free(r->b);
    het_sched_free(r->sched);
    het_device_free(r->cpu);
}

/* greedy text of a prompt run alone, the way `hetrun run --temp 0` does */
static char *solo_greedy(het_model *m, const int32_t *prompt, int n, int max_tokens)
{
    het_error err = { 0 };
    het_device *cpu = het_cpu_device_init(1, &err);
    struct het_sched_params sp = { .devices = &cpu, .n_devices = 1 };
    het_sched *sched = het_sched_init(&sp, &err);
    struct het_context_params cp = { .n_ctx = 256, .sched = sched };
    het_context *ctx = het_context_init(m, &cp, &err);
    const het_tokenizer *tok = het_model_tokenizer(m);
    int32_t V = het_model_get_config(m)->n_vocab;
    struct het_strbuf out = { 0 };
    het_strbuf_append(&out, "", 0);
    bool ok = het_context_eval(ctx, prompt, n, false, &err) == HET_OK;
    for (int i = 0; ok && i < max_tokens; i++) {
        int32_t id = het_argmax(het_context_logits(ctx, NULL), V);
        if (het_tokenizer_is_eog(tok, id)) break;
        char piece[64];
        int len = het_token_to_piece(tok, id, piece, sizeof piece, false);
        if (len > 0) het_strbuf_append(&out, piece, (size_t)len);
        ok = i + 1 == max_tokens || het_context_eval(ctx, &id, 1, false, &err) == HET_OK;
    }
    CHECK(ok, "solo: %s", err.msg);
    het_context_free(ctx);
    het_sched_free(sched);
    het_device_free(cpu);
    return het_strbuf_take(&out, NULL);
}

static het_job *submit(het_batcher *b, const int32_t *p, int n, int max_tokens, const char *stop,
                       enum het_submit want)
{
    const char *stops[1] = { stop };
    struct het_job_params jp = { .prompt = p, .n_prompt = n, .max_tokens = max_tokens, .stop = stops,
                                 .n_stop = stop ? 1 : 0 };
    het_job *j = NULL;
    char msg[256];
    enum het_submit r = het_batcher_submit(b, &jp, &j, msg, sizeof msg);
    CHECK(r == want, "submit -> %d (want %d): %s", r, want, msg);
    return j;
}

static char *wait_all(het_job *j, struct het_job_info *info)
{
    struct het_strbuf out = { 0 };
    size_t have = 0, last = 0;
    het_strbuf_append(&out, "", 0);
    while (!het_job_wait(j, &out, &have, NULL, 1000, info)) {
        CHECK(have >= last, "text only grows");
        last = have;
    }
    return het_strbuf_take(&out, NULL);
}

/* Wait for j's end; its first max tokens' log-probabilities into lp (and
 * ids, when not NULL). Returns how many tokens it generated. */
static int wait_logprobs(het_job *j, float *lp, int32_t *ids, int max)
{
    struct het_strbuf text = { 0 };
    struct het_job_tokens jt = { 0 };
    size_t have = 0;
    struct het_job_info info;
    while (!het_job_wait(j, &text, &have, &jt, 1000, &info)) {}
    for (size_t k = 0; k < jt.n && k < (size_t)max; k++) {
        lp[k] = jt.v[k].logprob;
        if (ids) ids[k] = jt.v[k].id;
    }
    const int n = (int)jt.n;
    het_job_tokens_free(&jt);
    het_strbuf_free(&text);
    return n;
}

static void test_engine_batching(het_model *m)
{
    const het_tokenizer *tok = het_model_tokenizer(m);
    static const char *const prompts[5] = { "Once upon a time", "The cat sat", "Lily and Ben went to the park",
                                            "One day", "Tom had a big red ball. He" };
    int32_t *ids[5], n[5];
    char *want[5];
    for (int i = 0; i < 5; i++) {
        het_error err = { 0 };
        CHECK(het_prompt_tokenize(tok, prompts[i], strlen(prompts[i]), &ids[i], &n[i], &err) == HET_OK, "tok");
        want[i] = solo_greedy(m, ids[i], n[i], 24);
    }
    struct rig r;
    if (!rig_open(&r, m, 3, 8, 8)) return; /* 3 slots, 5 jobs; 8-token prompt chunks */
    het_job *jobs[5];
    for (int i = 0; i < 5; i++) jobs[i] = submit(r.b, ids[i], n[i], 24, NULL, HET_SUBMIT_OK);
    for (int i = 0; i < 5; i++) {
        struct het_job_info info;
        char *got = wait_all(jobs[i], &info);
        CHECK(!strcmp(got, want[i]), "job %d batched [%s] alone [%s]", i, got, want[i]);
        CHECK(info.finish == HET_FINISH_LENGTH || info.finish == HET_FINISH_STOP, "finish %d", info.finish);
        CHECK(info.n_prompt == n[i] && info.ttft_ms > 0, "info");
        het_job_release(jobs[i]);
        free(got);
    }
    struct het_batcher_stats st;
    het_batcher_get_stats(r.b, &st);
    CHECK(st.active == 0 && st.queued == 0, "all slots free (%d active, %d queued)", st.active, st.queued);
    CHECK(st.step_seqs > st.steps, "sequences shared steps (%llu seqs in %llu steps)",
          (unsigned long long)st.step_seqs, (unsigned long long)st.steps);
    CHECK(st.n_devices == 1 && st.device_busy_us[0] > 0, "device stats");

    /* stop string: greedy "Once upon a time" -> ", there was a little girl..." */
    het_job *j = submit(r.b, ids[0], n[0], 24, "little", HET_SUBMIT_OK);
    struct het_job_info info;
    char *got = wait_all(j, &info);
    CHECK(info.finish == HET_FINISH_STOP && !strstr(got, "litt") && strlen(got) < strlen(want[0]) &&
              !strncmp(got, want[0], strlen(got)), "stop string: [%s]", got);
    het_job_release(j);
    free(got);

    /* logprobs: each greedy token is its distribution's most likely, and
     * the tokens' texts make up the text */
    {
        struct het_job_params jp = { .prompt = ids[1], .n_prompt = n[1], .max_tokens = 12, .logprobs = true,
                                     .top_logprobs = 3 };
        het_job *lj = NULL;
        char msg[256];
        CHECK(het_batcher_submit(r.b, &jp, &lj, msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
        struct het_strbuf lt = { 0 };
        struct het_job_tokens jt = { 0 };
        size_t have = 0;
        struct het_job_info li;
        while (lj && !het_job_wait(lj, &lt, &have, &jt, 1000, &li)) {}
        CHECK(jt.n == (size_t)li.n_gen && li.n_gen > 0, "%zu tokens for %d generated", jt.n, li.n_gen);
        size_t at = 0;
        for (size_t k = 0; k < jt.n; k++) {
            const struct het_job_token *t = &jt.v[k];
            CHECK(t->n_top == 3 && t->top[0].token == t->id && t->top[0].logprob == t->logprob &&
                      t->logprob <= 0 && t->top[1].logprob <= t->top[0].logprob, "token %zu", k);
            CHECK(t->start == at, "token %zu starts at %u, want %zu", k, t->start, at);
            at += t->len;
        }
        CHECK(at == lt.len && lt.len > 0 && !strncmp(lt.p, want[1], lt.len), "token texts make the text");
        het_job_tokens_free(&jt);
        het_strbuf_free(&lt);
        het_job_release(lj);
    }

    /* refused submissions */
    submit(r.b, ids[0], n[0], 256, NULL, HET_SUBMIT_INVALID);
    int32_t bad[2] = { 1, 1 << 20 };
    submit(r.b, bad, 2, 4, NULL, HET_SUBMIT_INVALID);
    submit(r.b, bad, 0, 4, NULL, HET_SUBMIT_INVALID);
    rig_close(&r);
    for (int i = 0; i < 5; i++) {
        free(ids[i]);
        free(want[i]);
    }
}

/* prefix reuse: a conversation's next turn (prompt + reply + more) reuses
 * the slot's KV cache and still gives exactly the text it gives alone */
static void test_engine_prefix(het_model *m)
{
    const het_tokenizer *tok = het_model_tokenizer(m);
    struct rig r;
    if (!rig_open(&r, m, 2, 4, 8)) return;
    int32_t *p1 = NULL, n1 = 0;
    het_error err = { 0 };
    het_prompt_tokenize(tok, "Lily and Ben went to the park", 29, &p1, &n1, &err);
    struct het_job_params jp = { .prompt = p1, .n_prompt = n1, .max_tokens = 10, .logprobs = true };
    het_job *j = NULL;
    char msg[256];
    CHECK(het_batcher_submit(r.b, &jp, &j, msg, sizeof msg) == HET_SUBMIT_OK, "turn 1: %s", msg);
    struct het_strbuf t1 = { 0 };
    struct het_job_tokens jt = { 0 };
    size_t have = 0;
    struct het_job_info info;
    while (j && !het_job_wait(j, &t1, &have, &jt, 1000, &info)) {}
    het_job_release(j);
    CHECK(info.n_cached == 0 && jt.n == 10, "turn 1: %d cached, %zu tokens", info.n_cached, jt.n);
    /* turn 2: turn 1's prompt, its reply, and two more tokens */
    int32_t n2 = n1 + (int32_t)jt.n + 2;
    int32_t *p2 = malloc((size_t)n2 * sizeof *p2);
    memcpy(p2, p1, (size_t)n1 * sizeof *p2);
    for (size_t k = 0; k < jt.n; k++) p2[n1 + (int32_t)k] = jt.v[k].id;
    p2[n2 - 2] = p1[1];
    p2[n2 - 1] = p1[2];
    char *want = solo_greedy(m, p2, n2, 12);
    jp = (struct het_job_params){ .prompt = p2, .n_prompt = n2, .max_tokens = 12 };
    CHECK(het_batcher_submit(r.b, &jp, &j, msg, sizeof msg) == HET_SUBMIT_OK, "turn 2: %s", msg);
    char *got = j ? wait_all(j, &info) : NULL;
    /* the reply's last token was sampled but never evaluated: not cached */
    CHECK(info.n_cached == n1 + (int32_t)jt.n - 1, "turn 2 reused %d tokens, want %d", info.n_cached,
          n1 + (int32_t)jt.n - 1);
    CHECK(got && !strcmp(got, want), "turn 2 with reuse [%s] alone [%s]", got ? got : "", want);
    het_job_release(j);
    free(got);
    /* the same prompt again: everything but its last token is reused */
    CHECK(het_batcher_submit(r.b, &jp, &j, msg, sizeof msg) == HET_SUBMIT_OK, "turn 2 again: %s", msg);
    got = j ? wait_all(j, &info) : NULL;
    CHECK(info.n_cached == n2 - 1 && got && !strcmp(got, want), "repeat: %d cached, [%s]", info.n_cached,
          got ? got : "");
    het_job_release(j);
    free(got);
    struct het_batcher_stats st;
    het_batcher_get_stats(r.b, &st);
    CHECK(st.cached_tokens == (uint64_t)(n1 + (int32_t)jt.n - 1 + n2 - 1), "cached tokens counted: %llu",
          (unsigned long long)st.cached_tokens);
    free(want);
    free(p1);
    free(p2);
    het_job_tokens_free(&jt);
    het_strbuf_free(&t1);
    rig_close(&r);
}

/* until the job has its first token (so it holds a slot) */
static void wait_running(het_job *j)
{
    struct het_strbuf out = { 0 };
    size_t have = 0;
    struct het_job_info info = { 0 };
    while (j && !het_job_wait(j, &out, &have, NULL, 1000, &info) && info.n_gen == 0) {}
    het_strbuf_free(&out);
}

/* calibration: sane figures, contexts left empty (its timings are not asserted) */
static void test_calibrate(het_model *m)
{
    struct rig a, b;
    if (!rig_open(&a, m, 1, 4, 64) || !rig_open(&b, m, 2, 4, 64)) return;
    het_model *const models[2] = { m, m };
    het_context *const ctxs[2] = { het_batcher_context(a.b), het_batcher_context(b.b) };
    struct het_route_cost cost[2];
    het_error err = { 0 };
    CHECK(het_route_calibrate(models, ctxs, 2, cost, &err) == HET_OK, "calibrate: %s", err.msg);
    for (int i = 0; i < 2; i++) {
        CHECK(cost[i].prefill_ms0 >= 0 && cost[i].prefill_ms_tok >= 0 && cost[i].decode_ms0 >= 0 &&
                  cost[i].decode_ms_tok >= 0 && het_route_cost_ms(&cost[i], 100, 10) < 1e9,
              "route %d figures", i);
        CHECK(het_route_cost_ms(&cost[i], 200, 10) >= het_route_cost_ms(&cost[i], 100, 10), "cost grows");
        CHECK(het_context_seq_n_past(ctxs[i], 0) == 0, "sequence reset after calibration");
    }
    CHECK(het_route_calibrate(models, ctxs, 0, cost, &err) == HET_ERR_INVALID, "no routes refused");
    rig_close(&a);
    rig_close(&b);
}

static void test_engine_queue(het_model *m)
{
    struct rig r;
    if (!rig_open(&r, m, 1, 1, 64)) return;
    const int32_t p[] = { 1, 403, 407, 261, 378 };
    het_job *a = submit(r.b, p, 5, 240, NULL, HET_SUBMIT_OK);   /* occupies the one slot */
    struct het_job_info info;
    wait_running(a);
    het_job *b = submit(r.b, p, 5, 4, NULL, HET_SUBMIT_OK);     /* waits in the queue */
    submit(r.b, p, 5, 4, NULL, HET_SUBMIT_FULL);                /* no room */
    het_job_release(a);                                          /* cancel: frees the slot */
    char *got = wait_all(b, &info);
    CHECK(info.finish == HET_FINISH_LENGTH && info.n_gen == 4, "queued job ran after the cancel (%d)", info.finish);
    het_job_release(b);
    free(got);
    /* the engine stops with a job running and one queued: both end with an error */
    het_job *c = submit(r.b, p, 5, 240, NULL, HET_SUBMIT_OK);
    wait_running(c);
    het_job *d = submit(r.b, p, 5, 240, NULL, HET_SUBMIT_OK);
    if (!c || !d) return;
    het_batcher_stop(r.b);
    free(wait_all(c, &info));
    CHECK(info.finish == HET_FINISH_ERROR || info.finish == HET_FINISH_LENGTH, "running job ended (%d)", info.finish);
    free(wait_all(d, &info));
    CHECK(info.finish == HET_FINISH_ERROR && strstr(info.error, "stopping"), "queued job ended: %s", info.error);
    het_job_release(c);
    het_job_release(d);
    submit(r.b, p, 5, 4, NULL, HET_SUBMIT_STOPPED);
    struct het_batcher_stats st;
    het_batcher_get_stats(r.b, &st);
    CHECK(st.active == 0 && st.queued == 0, "nothing left after stop");
    rig_close(&r);
}

#if defined(HET_HAVE_MHD) && defined(HET_HAVE_JANSSON)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* GET path on 127.0.0.1:port; the status line and body into out */
static bool http_get(int port, const char *path, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return false;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    bool ok = write(fd, req, (size_t)n) == n;
    size_t len = 0;
    ssize_t r;
    while (ok && len + 1 < cap && (r = read(fd, out + len, cap - 1 - len)) > 0) len += (size_t)r;
    out[len] = 0;
    close(fd);
    return ok && len > 0;
}

/* a server that listens before its model is ready answers 503 "loading" */
static void test_server_loading(het_model *m)
{
    struct rig r = { 0 };
    het_error err = { 0 };
    r.cpu = het_cpu_device_init(1, &err);
    struct het_sched_params sp = { .devices = &r.cpu, .n_devices = 1 };
    r.sched = het_sched_init(&sp, &err);
    struct het_serve_params p = { .port = 0 };
    het_server *s = het_server_listen(&p, &err);
    CHECK(s != NULL, "listen: %s", err.msg);
    if (!s) return;
    static char buf[1 << 16];
    int port = het_server_port(s);
    CHECK(http_get(port, "/health", buf, sizeof buf) && strstr(buf, "HTTP/1.1 503") && strstr(buf, "\"loading\""),
          "health while loading: %s", buf);
    CHECK(http_get(port, "/v1/models", buf, sizeof buf) && strstr(buf, "HTTP/1.1 503") &&
              strstr(buf, "\"code\":\"loading\""), "models while loading: %s", buf);
    CHECK(http_get(port, "/metrics", buf, sizeof buf) && strstr(buf, "HTTP/1.1 200") && strstr(buf, "het_ready 0\n"),
          "metrics while loading: %.200s", buf);
    struct het_serve_route route = { .model = m, .sched = r.sched, .id = "stories", .devices = "cpu", .n_ctx = 128,
                                     .n_parallel = 1 };
    CHECK(het_server_ready(s, &route, 1, &err) == HET_OK, "ready: %s", err.msg);
    CHECK(http_get(port, "/health", buf, sizeof buf) && strstr(buf, "HTTP/1.1 200") && strstr(buf, "\"ok\""),
          "health when ready: %s", buf);
    CHECK(http_get(port, "/metrics", buf, sizeof buf) && strstr(buf, "het_ready 1\n") &&
              strstr(buf, "het_free_slots{route=\"default\"} 1\n"), "metrics when ready");
    CHECK(het_server_ready(s, &route, 1, &err) != HET_OK, "a second ready is refused");
    het_server_stop(s);
    het_sched_free(r.sched);
    het_device_free(r.cpu);
}
#endif

/* sampled jobs over a 151,936-token vocabulary (qwen3-tiny): several in one
 * step are sampled on helper threads (batcher.c), and each must give the
 * text it gives in a step of its own (one job at a time: no helpers) */
static void test_engine_parallel_sampling(het_model *m)
{
    const het_tokenizer *tok = het_model_tokenizer(m);
    static const char *const prompts[4] = { "Once upon a time", "The cat", "{\"a\": [1, 2", "Hello" };
    int32_t *ids[4], n[4];
    for (int i = 0; i < 4; i++) {
        het_error err = { 0 };
        CHECK(het_prompt_tokenize(tok, prompts[i], strlen(prompts[i]), &ids[i], &n[i], &err) == HET_OK, "tok");
    }
    char *text[2][4] = { { NULL } };
    for (int together = 0; together < 2; together++) {
        struct rig r;
        if (!rig_open(&r, m, 4, 8, 64)) break;
        het_job *jobs[4] = { NULL };
        for (int i = 0; i < 4; i++) {
            /* no top-k (the API's default) for two of them, top-k and top-p for the others */
            struct het_job_params jp = { .prompt = ids[i], .n_prompt = n[i], .max_tokens = 16, .ignore_eos = true,
                                         .sampling = { .temp = 1.0f, .top_k = i % 2 ? 40 : 0,
                                                       .top_p = i % 2 ? 0.9f : 1.0f, .seed = 11 + (uint64_t)i } };
            char msg[256];
            CHECK(het_batcher_submit(r.b, &jp, &jobs[i], msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
            if (!together && jobs[i]) { /* alone: wait for it before the next */
                struct het_job_info info;
                text[0][i] = wait_all(jobs[i], &info);
                het_job_release(jobs[i]);
                jobs[i] = NULL;
            }
        }
        for (int i = 0; together && i < 4; i++) {
            struct het_job_info info;
            text[1][i] = jobs[i] ? wait_all(jobs[i], &info) : NULL;
            if (jobs[i]) het_job_release(jobs[i]);
        }
        struct het_batcher_stats st;
        het_batcher_get_stats(r.b, &st);
        if (together)
            CHECK(st.step_seqs > st.steps, "jobs shared steps (%llu seqs in %llu steps)",
                  (unsigned long long)st.step_seqs, (unsigned long long)st.steps);
        rig_close(&r);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(text[0][i] && text[1][i] && strlen(text[0][i]) > 0 && !strcmp(text[0][i], text[1][i]),
              "job %d sampled alone [%s], beside others [%s]", i, text[0][i] ? text[0][i] : "",
              text[1][i] ? text[1][i] : "");
        free(text[0][i]);
        free(text[1][i]);
        free(ids[i]);
    }
}

/* Greedy jobs' log-probabilities, bit for bit, each alone and the three
 * together, their prompt pieces and decodes sharing steps (q8_0 weights
 * with their load-time panels: every matmul row is the same for any batch
 * size; without panels a batch of 4 rows or more is packed per call and
 * adds in another order than the row kernels). The prompts are longer
 * than a step's pieces, so they are cut; the cuts must not move with what
 * else runs (a prompt cut elsewhere rounds differently, docs/serve.md):
 * together, the older jobs' pieces leave less than a piece of the budget to
 * the younger ones. */
static void test_engine_pieces(het_model *m)
{
    const het_tokenizer *tok = het_model_tokenizer(m);
    static const char *const prompts[3] = {
        "The quick brown fox jumps over the lazy dog while the cat sleeps",
        "One two three four five six seven eight nine ten eleven",
        "Lily and Ben went to the park to play with a big red ball",
    };
    int32_t *ids[3], n[3];
    for (int i = 0; i < 3; i++) {
        het_error err = { 0 };
        CHECK(het_prompt_tokenize(tok, prompts[i], strlen(prompts[i]), &ids[i], &n[i], &err) == HET_OK, "tok");
        CHECK(n[i] > 9 && n[i] % 9 != 0, "prompt %d: %d tokens, cut in pieces of 9", i, n[i]);
    }
    float lp[2][3][8];
    int32_t tk[2][3][8];
    int got_n[2][3] = { { 0 } };
    memset(lp, 0, sizeof lp);
    memset(tk, 0, sizeof tk);
    for (int run = 0; run < 4; run++) { /* runs 0-2: job `run` alone; run 3: all three */
        const bool together = run == 3;
        struct rig r;
        if (!rig_open(&r, m, 3, 8, 12)) break; /* pieces of 12 - 3 = 9 tokens, every slot empty */
        het_error err = { 0 };                  /* load-time panels, as a server has them */
        CHECK(het_model_prepare(m, r.sched, &err) == HET_OK, "prepare: %s", err.msg);
        het_job *jobs[3] = { NULL };
        char msg[256];
        for (int i = 0; i < 3; i++) {
            if (!together && i != run) continue;
            struct het_job_params jp = { .prompt = ids[i], .n_prompt = n[i], .max_tokens = 8, .ignore_eos = true,
                                         .logprobs = true };
            CHECK(het_batcher_submit(r.b, &jp, &jobs[i], msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
        }
        for (int i = 0; i < 3; i++) {
            if (!jobs[i]) continue;
            got_n[together][i] = wait_logprobs(jobs[i], lp[together][i], tk[together][i], 8);
            het_job_release(jobs[i]);
        }
        rig_close(&r);
    }
    for (int i = 0; i < 3; i++) {
        CHECK(got_n[0][i] == 8 && got_n[1][i] == 8, "job %d: 8 tokens each (%d, %d)", i, got_n[0][i], got_n[1][i]);
        int differ = 0;
        for (int k = 0; k < 8; k++) differ += memcmp(&lp[0][i][k], &lp[1][i][k], sizeof(float)) != 0;
        CHECK(differ == 0, "job %d: %d of 8 log-probabilities differ together", i, differ);
        if (getenv("HET_TEST_VERBOSE"))
            for (int k = 0; k < 8; k++)
                fprintf(stderr, "job %d token %d: %d %.9g | %d %.9g\n", i, k, tk[0][i][k], (double)lp[0][i][k],
                        tk[1][i][k], (double)lp[1][i][k]);
        free(ids[i]);
    }
}

/* Where a prompt is cut must not depend on the jobs beside it. A 10-token
 * prompt alone is one piece (batch 12, 2 slots: pieces of 10); admitted in
 * the same step after a 5-token prompt, the step has 7 tokens left: taken
 * as 7 + 3 it would round differently from one piece (the last 3 tokens'
 * attention by the kernel for few rows; qwen3-tiny, measured), so it must
 * wait a step and go whole. Its log-probabilities, bit for bit. */
static void test_engine_cuts(het_model *m)
{
    const int32_t a[10] = { 785, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 1393 };
    const int32_t b5[5] = { 9707, 1879, 374, 264, 1273 };
    float lp[2][6];
    int got[2] = { 0, 0 };
    memset(lp, 0, sizeof lp);
    for (int beside = 0; beside < 2; beside++) {
        struct rig r;
        if (!rig_open_stopped(&r, m, 2, 8, 12)) break;
        het_error err = { 0 };
        CHECK(het_model_prepare(m, r.sched, &err) == HET_OK, "prepare: %s", err.msg);
        het_job *jb = NULL, *ja = NULL;
        char msg[256];
        if (beside) {
            struct het_job_params jp = { .prompt = b5, .n_prompt = 5, .max_tokens = 6, .ignore_eos = true };
            CHECK(het_batcher_submit(r.b, &jp, &jb, msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
        }
        struct het_job_params jp = { .prompt = a, .n_prompt = 10, .max_tokens = 6, .ignore_eos = true,
                                     .logprobs = true };
        CHECK(het_batcher_submit(r.b, &jp, &ja, msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
        CHECK(het_batcher_start(r.b, &err) == HET_OK, "start: %s", err.msg);
        if (ja) {
            got[beside] = wait_logprobs(ja, lp[beside], NULL, 6);
            het_job_release(ja);
        }
        if (jb) {
            struct het_job_info info;
            free(wait_all(jb, &info));
            het_job_release(jb);
        }
        rig_close(&r);
    }
    CHECK(got[0] == 6 && got[1] == 6, "6 tokens each (%d, %d)", got[0], got[1]);
    CHECK(!memcmp(lp[0], lp[1], sizeof lp[0]), "log-probabilities alone and beside a shorter prompt differ (%.9g, %.9g)",
          (double)lp[0][0], (double)lp[1][0]);

    /* jobs queued before the engine starts, and never started: they end */
    struct rig r;
    if (rig_open_stopped(&r, m, 2, 8, 12)) {
        het_job *j = NULL;
        char msg[256];
        struct het_job_params jp = { .prompt = a, .n_prompt = 10, .max_tokens = 2 };
        CHECK(het_batcher_submit(r.b, &jp, &j, msg, sizeof msg) == HET_SUBMIT_OK, "submit: %s", msg);
        het_batcher_stop(r.b);
        struct het_job_info info;
        struct het_strbuf t = { 0 };
        size_t have = 0;
        CHECK(j && het_job_wait(j, &t, &have, NULL, 1000, &info) && info.finish == HET_FINISH_ERROR,
              "a job of an engine that never started ends with an error");
        het_strbuf_free(&t);
        if (j) het_job_release(j);
        het_job *k = NULL;
        CHECK(het_batcher_submit(r.b, &jp, &k, msg, sizeof msg) == HET_SUBMIT_STOPPED, "stopped: no more jobs");
        rig_close(&r);
    }
}

int main(void)
{
    test_utf8();
    test_chat_templates();
    test_route();
#ifdef HET_HAVE_JANSSON
    test_api();
#endif
    test_metrics();
    const char *path = het_test_source("models/stories260K.gguf");
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    CHECK(m, "cannot load %s: %s", path, err.msg);
    if (m) {
        test_engine_batching(m);
        test_engine_prefix(m);
        test_calibrate(m);
        test_engine_queue(m);
#if defined(HET_HAVE_MHD) && defined(HET_HAVE_JANSSON)
        test_server_loading(m);
#endif
    }
    het_model_free(m);
    const char *qpath = het_test_shared("models/synthetic/qwen3-tiny-q8_0.gguf");
    het_model *q = het_model_load(qpath, &err);
    CHECK(q, "cannot load %s: %s", qpath, err.msg);
    if (q) test_engine_parallel_sampling(q);
    if (q) test_engine_pieces(q);
    if (q) test_engine_cuts(q);
    het_model_free(q);
    return het_test_finish();
}
