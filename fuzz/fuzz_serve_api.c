/*
 * fuzz_serve_api.c — libFuzzer target for what the server does with a
 * request body before any model runs: UTF-8 checks, JSON parsing and
 * validation of completion and chat requests, chat-template rendering for
 * every family, and writing responses, stream chunks and error objects from
 * arbitrary (possibly non-UTF-8) text, with logprobs in both shapes. The
 * request fields include every sampling field (logprobs, penalties,
 * logit_bias, response_format, tools ...); accepted values must be in range.
 * The same bytes also drive the JSON-prefix recogniser of the sampler's
 * json_object mode. Any read past a validated length, or a response that is
 * not valid UTF-8, shows up under ASan or aborts.
 * Seeds: fuzz/corpus/serve/.
 *
 *   CC=clang cmake -S . -B build-fuzz -DHET_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_serve_api
 *   build-fuzz/fuzz_serve_api -max_total_time=60 /tmp/serve-corpus fuzz/corpus/serve
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_prefix.h"
#include "serve/api.h"
#include "serve/utf8.h"

static void must_be_utf8(char *s)
{
    if (s && !het_utf8_valid(s, strlen(s))) abort();
    free(s);
}

static void render_all(const struct het_api_request *r)
{
    static const enum het_chat_format formats[] = { HET_CHAT_PLAIN, HET_CHAT_CHATML, HET_CHAT_LLAMA2,
                                                    HET_CHAT_LLAMA3 };
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        size_t len = 0;
        char *text = het_chat_render(formats[i], r->msgs, r->n_msgs, &len);
        if (text && strlen(text) > len) abort();
        free(text);
    }
}

static void respond(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct het_api_result res = { .id = "cmpl-1", .created = 1, .model = "m", .text = text, .len = size,
                                  .finish = "stop", .prompt_tokens = 1, .completion_tokens = 2, .ttft_ms = 1,
                                  .decode_ms = 2 };
    struct het_api_route_info ri = { "default", "m", "cpu", "fuzz", -1 };
    /* logprobs: the data cut into tokens and alternatives */
    struct het_api_logprob alts[4];
    struct het_api_token toks[4];
    size_t q = size / 4;
    for (int i = 0; i < 4; i++) {
        alts[i] = (struct het_api_logprob){ text + i * q, q, -(float)i };
        toks[i] = (struct het_api_token){ { text + i * q, q, -0.5f * (float)i }, alts, i, i * q };
    }
    for (int kind = 0; kind < 2; kind++) {
        res.logprobs = false;
        must_be_utf8(het_api_response_json((enum het_api_kind)kind, &res, &ri, NULL));
        must_be_utf8(het_api_chunk_json((enum het_api_kind)kind, &res, kind == 1, false, NULL, NULL));
        res.logprobs = true;
        res.tokens = toks;
        res.n_tokens = 4;
        must_be_utf8(het_api_response_json((enum het_api_kind)kind, &res, &ri, NULL));
        must_be_utf8(het_api_chunk_json((enum het_api_kind)kind, &res, false, false, &ri, NULL));
        struct het_api_result two[2] = { res, res };
        two[1].index = 1;
        must_be_utf8(het_api_response_json_n((enum het_api_kind)kind, two, 2, &ri, NULL));
    }
    struct het_api_error e;
    het_api_error_set(&e, 400, "invalid_request_error", NULL, "p", "%.*s", (int)(size < 300 ? size : 300), text);
    must_be_utf8(het_api_error_json(&e, NULL));
    size_t tail = het_utf8_incomplete_tail(text, size);
    if (tail > 3 || tail > size) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int kind = 0; kind < 2; kind++) {
        struct het_api_request r;
        struct het_api_error e;
        if (het_api_parse((const char *)data, size, (enum het_api_kind)kind, &r, &e)) {
            if (kind == HET_API_CHAT) render_all(&r);
            if (r.n_stop > HET_API_MAX_STOP || (r.prompt && strlen(r.prompt) > r.prompt_len)) abort();
            if (r.n < 1 || r.n > HET_API_MAX_N || r.top_logprobs < 0 || r.top_logprobs > HET_API_MAX_TOP_LOGPROBS || r.n_logit_bias < 0 ||
                r.n_logit_bias > HET_API_MAX_LOGIT_BIAS || !(r.min_p >= 0 && r.min_p <= 1) ||
                !(r.presence_penalty >= -2 && r.presence_penalty <= 2) || r.repeat_last_n < -1)
                abort();
            for (int i = 0; i < r.n_logit_bias; i++)
                if (r.logit_bias[i].token < 0 || !(r.logit_bias[i].bias >= -100 && r.logit_bias[i].bias <= 100)) abort();
        } else if (e.status < 400 || e.status > 599 || !e.message[0]) {
            abort();
        }
        het_api_request_free(&r);
    }
    respond(data, size);
    /* the JSON-prefix recogniser: whole, then byte by byte; both must agree */
    struct het_json_prefix a, b;
    het_json_prefix_init(&a);
    het_json_prefix_init(&b);
    bool whole = het_json_prefix_feed(&a, (const char *)data, size), bytes = true;
    for (size_t i = 0; bytes && i < size; i++) bytes = het_json_prefix_feed(&b, (const char *)data + i, 1);
    if (whole != bytes || (whole && het_json_prefix_done(&a) != het_json_prefix_done(&b))) abort();
    return 0;
}
