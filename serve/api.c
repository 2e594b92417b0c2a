/*
 * api.c — OpenAI-shaped JSON in and out (see api.h), with jansson.
 *
 * Validation names the offending field in the error's param ("messages[2].
 * content", "temperature") so a client can tell what to fix. No field is
 * ignored: one we do not know, or a value asking for what het does not do
 * (tools, best_of > 1, a JSON schema), is refused, so a client never gets an
 * answer that silently disregards what it asked for. Generated
 * text may hold bytes that are not UTF-8 (byte-fallback tokens); they are
 * replaced by U+FFFD, as JSON strings must be valid UTF-8.
 */
#include "serve/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/strbuf.h"
#include "serve/utf8.h"

void het_api_error_set(struct het_api_error *e, int status, const char *type, const char *code, const char *param,
                       const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

#ifdef HET_HAVE_JANSSON
#include <jansson.h>

/* a JSON string from bytes that may not be UTF-8 */
static json_t *text_json(const char *s, size_t n)
{
    if (het_utf8_valid(s, n)) return json_stringn(s, n);
    struct het_strbuf b = { 0 };
    het_utf8_sanitize(&b, s, n);
    json_t *j = b.oom ? NULL : json_stringn(b.p, b.len);
    het_strbuf_free(&b);
    return j;
}

static char *dump(json_t *j, size_t *len)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(j);
    if (s && len) *len = strlen(s);
    return s;
}

char *het_api_error_json(const struct het_api_error *e, size_t *len)
{
    json_t *err = json_pack("{s:o, s:s, s:o, s:o}", "message", text_json(e->message, strlen(e->message)), "type",
                            e->type ? e->type : "invalid_request_error", "param",
                            e->param[0] ? json_string(e->param) : json_null(), "code",
                            e->code ? json_string(e->code) : json_null());
    return dump(err ? json_pack("{s:o}", "error", err) : NULL, len);
}

/* ---- request parsing ------------------------------------------------------------ */

/* a 400 naming param; returns false so validators can `return bad(...)` */
static bool bad(struct het_api_error *e, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool bad(struct het_api_error *e, const char *param, const char *fmt, ...)
{
    char msg[sizeof e->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    het_api_error_set(e, 400, "invalid_request_error", NULL, param, "%s", msg);
    return false;
}

static bool get_number(json_t *root, const char *key, float lo, float hi, float *out, struct het_api_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) return bad(e, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) return bad(e, key, "'%s' must be between %g and %g (got %g)", key, lo, hi, x);
    *out = (float)x;
    return true;
}

static bool get_int(json_t *root, const char *key, json_int_t lo, json_int_t hi, json_int_t *out, bool *given,
                    struct het_api_error *e)
{
    json_t *v = json_object_get(root, key);
    if (given) *given = false;
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) return bad(e, key, "'%s' must be an integer", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return bad(e, key, "'%s' must be between %lld and %lld (got %lld)", key, (long long)lo,
                                     (long long)hi, (long long)x);
    *out = x;
    if (given) *given = true;
    return true;
}

static bool get_bool(json_t *root, const char *key, bool *out, struct het_api_error *e)
{
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad(e, key, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return true;
}

static bool parse_stop(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *v = json_object_get(root, "stop");
    if (!v || json_is_null(v)) return true;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return bad(e, "stop", "'stop' must not be an empty string");
        r->stop[r->n_stop++] = json_string_value(v);
        return true;
    }
    if (!json_is_array(v)) return bad(e, "stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > HET_API_MAX_STOP)
        return bad(e, "stop", "'stop' takes at most %d strings", HET_API_MAX_STOP);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *s = json_array_get(v, i);
        char param[32];
        snprintf(param, sizeof param, "stop[%zu]", i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return bad(e, param, "'%s' must be a non-empty string", param);
        r->stop[r->n_stop++] = json_string_value(s);
    }
    return true;
}

static bool parse_sampling(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_int_t x = 0;
    bool given;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->max_tokens = -1;
    r->route = -1;
    if (!get_number(root, "temperature", 0, 2, &r->temperature, e)) return false;
    if (!get_number(root, "top_p", 0, 1, &r->top_p, e)) return false;
    if (!get_int(root, "top_k", 0, 1 << 30, &x, &given, e)) return false;
    if (given) r->top_k = (int32_t)x;
    const char *mt = json_object_get(root, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (!get_int(root, mt, 1, INT32_MAX, &x, &given, e)) return false;
    if (given) r->max_tokens = (int32_t)x;
    if (!get_int(root, "seed", INT64_MIN, INT64_MAX, &x, &r->has_seed, e)) return false;
    r->seed = (uint64_t)x;
    r->n = 1;
    if (!get_int(root, "n", 1, HET_API_MAX_N, &x, &given, e)) return false;
    if (given) r->n = (int)x;
    if (!get_bool(root, "stream", &r->stream, e) || !get_bool(root, "ignore_eos", &r->ignore_eos, e)) return false;
    json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return bad(e, "stream_options", "'stream_options' must be an object");
        const char *k;
        json_t *v;
        json_object_foreach(so, k, v) {
            char param[64];
            snprintf(param, sizeof param, "stream_options.%.40s", k);
            if (strcmp(k, "include_usage")) return bad(e, param, "unknown field '%s'", param);
        }
        if (!get_bool(so, "include_usage", &r->include_usage, e)) {
            snprintf(e->param, sizeof e->param, "stream_options.include_usage");
            return false;
        }
    }
    r->repeat_penalty = 1.0f;
    r->repeat_last_n = 64;
    if (!get_number(root, "presence_penalty", -2, 2, &r->presence_penalty, e) ||
        !get_number(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e) ||
        !get_number(root, "repeat_penalty", 0, 10, &r->repeat_penalty, e) ||
        !get_number(root, "min_p", 0, 1, &r->min_p, e))
        return false;
    if (!get_int(root, "repeat_last_n", -1, 1 << 20, &x, &given, e)) return false;
    if (given) r->repeat_last_n = (int32_t)x;
    return parse_stop(root, r, e);
}

/* logit_bias: {"token id": bias in [-100, 100], ...} */
static bool parse_logit_bias(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *lb = json_object_get(root, "logit_bias");
    if (!lb || json_is_null(lb)) return true;
    if (!json_is_object(lb)) return bad(e, "logit_bias", "'logit_bias' must be an object of token id: bias");
    size_t n = json_object_size(lb);
    if (n > HET_API_MAX_LOGIT_BIAS)
        return bad(e, "logit_bias", "'logit_bias' takes at most %d tokens", HET_API_MAX_LOGIT_BIAS);
    if (n == 0) return true;
    r->logit_bias = calloc(n, sizeof *r->logit_bias);
    if (!r->logit_bias) {
        het_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    const char *k;
    json_t *v;
    json_object_foreach(lb, k, v) {
        char *end;
        long id = strtol(k, &end, 10);
        if (!*k || *end || id < 0 || id > INT32_MAX)
            return bad(e, "logit_bias", "'logit_bias' keys must be token ids (got '%.40s')", k);
        if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100))
            return bad(e, "logit_bias", "'logit_bias[%ld]' must be a number between -100 and 100", id);
        r->logit_bias[r->n_logit_bias++] = (struct het_logit_bias){ (int32_t)id, (float)json_number_value(v) };
    }
    return true;
}

/* chat: logprobs true/false + top_logprobs 0..20; completions: logprobs 0..5 */
static bool parse_logprobs(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_int_t x = 0;
    bool given;
    if (r->kind == HET_API_COMPLETION) {
        if (!get_int(root, "logprobs", 0, 5, &x, &given, e)) return false;
        r->logprobs = given;
        r->top_logprobs = (int)x;
        return true;
    }
    if (!get_bool(root, "logprobs", &r->logprobs, e)) return false;
    if (!get_int(root, "top_logprobs", 0, HET_API_MAX_TOP_LOGPROBS, &x, &given, e)) return false;
    if (given && !r->logprobs) return bad(e, "top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    r->top_logprobs = (int)x;
    return true;
}

/* response_format: text, or json_object (constrained); json_schema is refused */
static bool parse_response_format(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *rf = json_object_get(root, "response_format");
    if (!rf || json_is_null(rf)) return true;
    const char *type = json_string_value(json_object_get(rf, "type"));
    if (!json_is_object(rf) || !type)
        return bad(e, "response_format", "'response_format' must be {\"type\": \"text\"} or {\"type\": \"json_object\"}");
    if (!strcmp(type, "json_object")) r->json_object = true;
    else if (strcmp(type, "text"))
        return bad(e, "response_format.type", "response_format type '%.40s' is not supported (text and json_object are)",
                   type);
    const char *k;
    json_t *v;
    json_object_foreach(rf, k, v) {
        char param[64];
        snprintf(param, sizeof param, "response_format.%.40s", k);
        if (strcmp(k, "type")) return bad(e, param, "unknown field '%s'", param);
    }
    return true;
}

/* fields whose only supported value is "off" */
static bool parse_unsupported(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *v;
    if ((v = json_object_get(root, "tools")) && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)))
        return bad(e, "tools", "tool calling is not supported by this server: send the request without 'tools'");
    if ((v = json_object_get(root, "functions")) && !json_is_null(v))
        return bad(e, "functions", "function calling is not supported by this server: send the request without 'functions'");
    const char *tc = json_string_value(json_object_get(root, "tool_choice"));
    if ((v = json_object_get(root, "tool_choice")) && !json_is_null(v) && !(tc && !strcmp(tc, "none")))
        return bad(e, "tool_choice", "tool calling is not supported: 'tool_choice' may only be \"none\"");
    const char *fc = json_string_value(json_object_get(root, "function_call"));
    if ((v = json_object_get(root, "function_call")) && !json_is_null(v) && !(fc && !strcmp(fc, "none")))
        return bad(e, "function_call", "function calling is not supported: 'function_call' may only be \"none\"");
    if ((v = json_object_get(root, "parallel_tool_calls")) && !json_is_null(v) && !json_is_boolean(v))
        return bad(e, "parallel_tool_calls", "'parallel_tool_calls' must be true or false");
    if ((v = json_object_get(root, "echo")) && !json_is_null(v) && !json_is_false(v))
        return bad(e, "echo", "'echo' is not supported (only false)");
    json_int_t x = 1;
    if (!get_int(root, "best_of", 1, 1, &x, NULL, e)) {
        e->code = "unsupported_value";
        snprintf(e->message, sizeof e->message, "'best_of' must be 1: one candidate per request is supported");
        return false;
    }
    if ((v = json_object_get(root, "suffix")) && !json_is_null(v) && !(json_is_string(v) && !json_string_length(v)))
        return bad(e, "suffix", "'suffix' (insertion) is not supported");
    v = json_object_get(root, "user");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) return bad(e, "user", "'user' must be a string");
        r->user = json_string_value(v);
    }
    return true;
}

/* every field a request may carry; anything else is refused by name */
static bool check_known(json_t *root, enum het_api_kind kind, struct het_api_error *e)
{
    static const char *const common[] = {
        "model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream",
        "stream_options", "n", "logprobs", "presence_penalty", "frequency_penalty", "logit_bias", "repeat_penalty",
        "repeat_last_n", "min_p", "response_format", "user", "ignore_eos", "het_route",
    };
    static const char *const chat[] = { "messages", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                                        "functions", "function_call" };
    static const char *const completion[] = { "prompt", "echo", "best_of", "suffix" };
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        bool known = false;
        for (size_t i = 0; !known && i < sizeof common / sizeof common[0]; i++) known = !strcmp(k, common[i]);
        const char *const *extra = kind == HET_API_CHAT ? chat : completion;
        size_t n_extra = kind == HET_API_CHAT ? sizeof chat / sizeof chat[0] : sizeof completion / sizeof completion[0];
        for (size_t i = 0; !known && i < n_extra; i++) known = !strcmp(k, extra[i]);
        if (!known) {
            char param[64];
            snprintf(param, sizeof param, "%.60s", k);
            bad(e, param, "unknown field '%.60s': this server does not support it", k);
            e->code = "unknown_parameter";
            return false;
        }
    }
    return true;
}

static bool parse_route(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *v = json_object_get(root, "het_route");
    if (!v || json_is_null(v)) return true;
    const char *s = json_is_string(v) ? json_string_value(v) : "";
    if (!strcmp(s, "auto")) return true;
    if (!strcmp(s, "default")) r->route = HET_ROUTE_DEFAULT;
    else if (!strcmp(s, "long")) r->route = HET_ROUTE_LONG;
    else return bad(e, "het_route", "'het_route' must be \"auto\", \"default\" or \"long\"");
    return true;
}

static bool parse_prompt(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *p = json_object_get(root, "prompt");
    if (!p || json_is_null(p)) return bad(e, "prompt", "'prompt' is required");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (json_is_string(p)) {
        r->prompt = json_string_value(p);
        r->prompt_len = json_string_length(p);
        return true;
    }
    if (!json_is_array(p)) return bad(e, "prompt", "'prompt' must be a string or an array of token ids");
    size_t n = json_array_size(p);
    if (n == 0) return bad(e, "prompt", "'prompt' must not be empty");
    if (n > (1u << 24)) return bad(e, "prompt", "'prompt' has too many tokens");
    r->prompt_tokens = malloc(n * sizeof *r->prompt_tokens);
    if (!r->prompt_tokens) {
        het_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(p, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > INT32_MAX) {
            char param[32];
            snprintf(param, sizeof param, "prompt[%zu]", i);
            if (json_is_string(t) && i == 0)
                return bad(e, "prompt", "one prompt per request is supported (got an array of %zu)", n);
            return bad(e, param, "'%s' must be a token id (a non-negative integer)", param);
        }
        r->prompt_tokens[i] = (int32_t)json_integer_value(t);
    }
    r->n_prompt_tokens = (int32_t)n;
    return true;
}

static bool known_role(const char *role)
{
    static const char *const roles[] = { "system", "developer", "user", "assistant", "tool" };
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++)
        if (!strcmp(role, roles[i])) return true;
    return false;
}

/* content: a string, null, or an array of {"type":"text","text":...} parts,
 * which are joined into one string stored back in the message */
static bool message_content(json_t *msg, const char *param, const char **text, size_t *len, struct het_api_error *e)
{
    json_t *c = json_object_get(msg, "content");
    char where[64];
    snprintf(where, sizeof where, "%s.content", param);
    if (!c || json_is_null(c)) {
        *text = "";
        *len = 0;
        return true;
    }
    if (json_is_array(c)) {
        struct het_strbuf b = { 0 };
        for (size_t i = 0; i < json_array_size(c); i++) {
            json_t *part = json_array_get(c, i), *t = json_object_get(part, "text");
            const char *type = json_string_value(json_object_get(part, "type"));
            if (!json_is_object(part) || !type || strcmp(type, "text") || !json_is_string(t)) {
                het_strbuf_free(&b);
                return bad(e, where, "'%s[%zu]' must be a {\"type\":\"text\",\"text\":...} part", where, i);
            }
            het_strbuf_append(&b, json_string_value(t), json_string_length(t));
        }
        json_t *joined = b.oom ? NULL : json_stringn(b.p ? b.p : "", b.len);
        het_strbuf_free(&b);
        if (!joined || json_object_set_new(msg, "content", joined)) {
            het_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
            return false;
        }
        c = joined;
    }
    if (!json_is_string(c)) return bad(e, where, "'%s' must be a string or an array of text parts", where);
    *text = json_string_value(c);
    *len = json_string_length(c);
    return true;
}

static bool parse_messages(json_t *root, struct het_api_request *r, struct het_api_error *e)
{
    json_t *m = json_object_get(root, "messages");
    if (!m || json_is_null(m)) return bad(e, "messages", "'messages' is required");
    if (!json_is_array(m)) return bad(e, "messages", "'messages' must be an array");
    size_t n = json_array_size(m);
    if (n == 0) return bad(e, "messages", "'messages' must not be empty");
    if (n > 100000) return bad(e, "messages", "'messages' has too many entries");
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) {
        het_api_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *msg = json_array_get(m, i);
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(msg)) return bad(e, param, "'%s' must be an object", param);
        const char *role = json_string_value(json_object_get(msg, "role"));
        if (!role || !known_role(role)) {
            char rp[64];
            snprintf(rp, sizeof rp, "%s.role", param);
            return bad(e, rp, "'%s' must be one of system, developer, user, assistant, tool", rp);
        }
        r->msgs[i].role = !strcmp(role, "developer") ? "system" : role;
        if (!message_content(msg, param, &r->msgs[i].content, &r->msgs[i].len, e)) return false;
        r->n_msgs = (int)i + 1;
    }
    return true;
}

bool het_api_parse(const char *body, size_t len, enum het_api_kind kind, struct het_api_request *r,
                   struct het_api_error *e)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    if (!het_utf8_valid(body, len)) return bad(e, NULL, "the request body is not valid UTF-8");
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root) return bad(e, NULL, "the request body is not valid JSON (line %d, column %d: %s)", jerr.line,
                          jerr.column, jerr.text);
    r->root = root;
    if (!json_is_object(root)) return bad(e, NULL, "the request body must be a JSON object");
    json_t *model = json_object_get(root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) return bad(e, "model", "'model' must be a string");
        r->model = json_string_value(model);
    }
    if (!check_known(root, kind, e) || !parse_sampling(root, r, e) || !parse_route(root, r, e) ||
        !parse_logit_bias(root, r, e) || !parse_logprobs(root, r, e) || !parse_response_format(root, r, e) ||
        !parse_unsupported(root, r, e))
        return false;
    return kind == HET_API_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e);
}

void het_api_request_free(struct het_api_request *r)
{
    json_decref(r->root);
    free(r->prompt_tokens);
    free(r->msgs);
    free(r->logit_bias);
    memset(r, 0, sizeof *r);
}

/* ---- responses -------------------------------------------------------------------- */

static json_t *het_object(const struct het_api_route_info *ri, const struct het_api_result *res)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "route", ri->route, "model", ri->model, "devices", ri->devices,
                          "reason", ri->reason);
    if (!o) return NULL;
    if (ri->threshold >= 0) json_object_set_new(o, "threshold", json_integer(ri->threshold));
    if (res->ttft_ms > 0) json_object_set_new(o, "time_to_first_token_ms", json_real(res->ttft_ms));
    if (res->completion_tokens > 1 && res->decode_ms > 0) {
        double tps = (res->completion_tokens - 1) * 1000.0 / res->decode_ms;
        json_object_set_new(o, "decode_tokens_per_s", json_real(tps));
    }
    return o;
}

static json_t *usage_object(const struct het_api_result *res)
{
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", (json_int_t)res->prompt_tokens,
                     "completion_tokens", (json_int_t)res->completion_tokens, "total_tokens",
                     (json_int_t)res->prompt_tokens + res->completion_tokens, "prompt_tokens_details",
                     "cached_tokens", (json_int_t)res->cached_tokens);
}

static json_t *envelope(const struct het_api_result *res, const char *object)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", res->id, "object", object, "created", (json_int_t)res->created,
                     "model", res->model);
}

static json_t *finish_json(const char *finish)
{
    return finish ? json_string(finish) : json_null();
}

/* "bytes": the token's bytes as numbers (chat logprobs) */
static json_t *bytes_json(const char *s, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer((unsigned char)s[i]));
    return a;
}

static json_t *chat_logprob(const struct het_api_logprob *lp)
{
    return json_pack("{s:o, s:f, s:o}", "token", text_json(lp->text, lp->len), "logprob", (double)lp->logprob,
                     "bytes", bytes_json(lp->text, lp->len));
}

/* the choice's "logprobs": chat {"content":[...],"refusal":null};
 * completions {"tokens","token_logprobs","top_logprobs","text_offset"} */
static json_t *logprobs_json(enum het_api_kind kind, const struct het_api_result *res)
{
    if (!res->logprobs) return json_null();
    if (kind == HET_API_CHAT) {
        json_t *content = json_array();
        for (int i = 0; i < res->n_tokens; i++) {
            const struct het_api_token *t = &res->tokens[i];
            json_t *o = chat_logprob(&t->tok), *top = json_array();
            for (int k = 0; k < t->n_top; k++) json_array_append_new(top, chat_logprob(&t->top[k]));
            json_object_set_new(o, "top_logprobs", top);
            json_array_append_new(content, o);
        }
        return json_pack("{s:o, s:n}", "content", content, "refusal");
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < res->n_tokens; i++) {
        const struct het_api_token *t = &res->tokens[i];
        json_array_append_new(toks, text_json(t->tok.text, t->tok.len));
        json_array_append_new(lps, json_real(t->tok.logprob));
        json_t *top = json_object();
        for (int k = 0; k < t->n_top; k++) {
            json_t *key = text_json(t->top[k].text, t->top[k].len);
            if (key && !json_object_get(top, json_string_value(key)))
                json_object_set_new(top, json_string_value(key), json_real(t->top[k].logprob));
            json_decref(key);
        }
        json_array_append_new(tops, top);
        json_array_append_new(offs, json_integer((json_int_t)t->offset));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

static json_t *whole_choice(enum het_api_kind kind, const struct het_api_result *res)
{
    if (kind == HET_API_CHAT)
        return json_pack("{s:i, s:{s:s, s:o}, s:o, s:o}", "index", res->index, "message", "role", "assistant",
                         "content", text_json(res->text, res->len), "logprobs", logprobs_json(kind, res),
                         "finish_reason", finish_json(res->finish));
    return json_pack("{s:o, s:i, s:o, s:o}", "text", text_json(res->text, res->len), "index", res->index, "logprobs",
                     logprobs_json(kind, res), "finish_reason", finish_json(res->finish));
}

char *het_api_response_json(enum het_api_kind kind, const struct het_api_result *res,
                            const struct het_api_route_info *ri, size_t *len)
{
    return het_api_response_json_n(kind, res, 1, ri, len);
}

char *het_api_response_json_n(enum het_api_kind kind, const struct het_api_result *res, int n,
                              const struct het_api_route_info *ri, size_t *len)
{
    bool chat = kind == HET_API_CHAT;
    json_t *o = envelope(res, chat ? "chat.completion" : "text_completion");
    if (!o) return NULL;
    json_t *choices = json_array();
    struct het_api_result total = res[0];
    for (int i = 0; i < n; i++) {
        json_t *c = whole_choice(kind, &res[i]);
        if (!c || json_array_append_new(choices, c)) {
            json_decref(choices);
            choices = NULL;
            break;
        }
        if (i) total.completion_tokens += res[i].completion_tokens;
    }
    json_object_set_new(o, "choices", choices);
    json_object_set_new(o, "usage", usage_object(&total));
    if (ri) json_object_set_new(o, "het", het_object(ri, res));
    if (!json_object_get(o, "choices") || !json_object_get(o, "usage")) {
        json_decref(o);
        return NULL;
    }
    return dump(o, len);
}

static json_t *chunk_choice(enum het_api_kind kind, const struct het_api_result *res, bool first)
{
    if (kind == HET_API_COMPLETION)
        return json_pack("{s:o, s:i, s:o, s:o}", "text", text_json(res->text, res->len), "index", res->index,
                         "logprobs", logprobs_json(kind, res), "finish_reason", finish_json(res->finish));
    json_t *delta = json_object();
    if (first) json_object_set_new(delta, "role", json_string("assistant"));
    if (res->len || first) json_object_set_new(delta, "content", text_json(res->text, res->len));
    return json_pack("{s:i, s:o, s:o, s:o}", "index", res->index, "delta", delta, "logprobs", logprobs_json(kind, res),
                     "finish_reason", finish_json(res->finish));
}

char *het_api_chunk_json(enum het_api_kind kind, const struct het_api_result *res, bool first, bool usage,
                         const struct het_api_route_info *ri, size_t *len)
{
    json_t *o = envelope(res, kind == HET_API_CHAT ? "chat.completion.chunk" : "text_completion");
    if (!o) return NULL;
    if (usage) {
        json_object_set_new(o, "choices", json_array());
        json_object_set_new(o, "usage", usage_object(res));
    } else {
        json_t *c = chunk_choice(kind, res, first);
        json_object_set_new(o, "choices", c ? json_pack("[o]", c) : NULL);
    }
    if (ri) json_object_set_new(o, "het", het_object(ri, res));
    if (!json_object_get(o, "choices")) {
        json_decref(o);
        return NULL;
    }
    return dump(o, len);
}

char *het_api_models_json(const char *const *ids, int n, long long created, size_t *len)
{
    json_t *data = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(data, json_pack("{s:s, s:s, s:I, s:s}", "id", ids[i], "object", "model", "created",
                                              (json_int_t)created, "owned_by", "het"));
    return dump(json_pack("{s:s, s:o}", "object", "list", "data", data), len);
}

#endif /* HET_HAVE_JANSSON */
