/*
 * fuzz_serve_api.c — libFuzzer target for what the server does with a
 * request body before any model runs: UTF-8 checks, JSON parsing and
 * validation of completion and chat requests, chat-template rendering for
 * every family, and writing responses, stream chunks and error objects from
 * arbitrary (possibly non-UTF-8) text. Any read past a validated length, or
 * a response that is not valid UTF-8, shows up under ASan or aborts.
 * Seeds: fuzz/corpus/serve/.
 *
 *   CC=clang cmake -S . -B build-fuzz -DHET_FUZZ=ON
 *   cmake --build build-fuzz --target fuzz_serve_api
 *   build-fuzz/fuzz_serve_api -max_total_time=60 /tmp/serve-corpus fuzz/corpus/serve
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    for (int kind = 0; kind < 2; kind++) {
        must_be_utf8(het_api_response_json((enum het_api_kind)kind, &res, &ri, NULL));
        must_be_utf8(het_api_chunk_json((enum het_api_kind)kind, &res, kind == 1, false, NULL, NULL));
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
        } else if (e.status < 400 || e.status > 599 || !e.message[0]) {
            abort();
        }
        het_api_request_free(&r);
    }
    respond(data, size);
    return 0;
}
