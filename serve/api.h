/*
 * api.h — the OpenAI-shaped request and response bodies: parsing and
 * validating /v1/completions and /v1/chat/completions requests, and writing
 * responses, stream chunks and error objects
 * {"error":{"message","type","param","code"}}. No HTTP here (server.c).
 */
#ifndef HET_SERVE_API_H
#define HET_SERVE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/serve.h"

#define HET_API_MAX_STOP 4

struct het_api_error {
    int         status;        /* HTTP status                                  */
    const char *type;          /* "invalid_request_error", "server_error", ... */
    const char *code;          /* NULL, "model_not_found", ...                 */
    char        param[64];     /* the offending field; "" = null               */
    char        message[384];
};
void het_api_error_set(struct het_api_error *e, int status, const char *type, const char *code, const char *param,
                       const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error":{...}}; malloc'ed, NULL when out of memory */
char *het_api_error_json(const struct het_api_error *e, size_t *len);

enum het_api_kind { HET_API_COMPLETION = 0, HET_API_CHAT };

struct het_api_request {
    enum het_api_kind    kind;
    const char          *model;            /* NULL: not given                     */
    const char          *prompt;           /* completions: text, or NULL          */
    size_t               prompt_len;
    int32_t             *prompt_tokens;    /* completions: token ids (owned)      */
    int32_t              n_prompt_tokens;
    struct het_chat_msg *msgs;             /* chat (owned array)                  */
    int                  n_msgs;
    int32_t              max_tokens;       /* -1: not given                       */
    float                temperature, top_p;
    int32_t              top_k;
    bool                 has_seed;
    uint64_t             seed;
    const char          *stop[HET_API_MAX_STOP];
    int                  n_stop;
    bool                 stream, include_usage;
    bool                 ignore_eos;       /* extension: generate max_tokens      */
    int                  route;            /* -1: by policy ("het_route" field)   */
    void                *root;             /* the parsed JSON; strings point in it */
};
/* Parse and validate; unknown fields are ignored. false: e says why. */
bool het_api_parse(const char *body, size_t len, enum het_api_kind kind, struct het_api_request *r,
                   struct het_api_error *e);
void het_api_request_free(struct het_api_request *r);

/* Where a request ran, for the `het` object. */
struct het_api_route_info {
    const char *route, *model, *devices, *reason;
    int32_t     threshold;     /* < 0: single route */
};

struct het_api_result {
    const char *id;
    long long   created;
    const char *model;
    const char *text;          /* for chunks: the new text                    */
    size_t      len;
    const char *finish;        /* "stop", "length"; chunks: NULL while running */
    int32_t     prompt_tokens, completion_tokens;
    double      ttft_ms, decode_ms;
};
/* A whole (non-streamed) response. */
char *het_api_response_json(enum het_api_kind kind, const struct het_api_result *res,
                            const struct het_api_route_info *ri, size_t *len);
/* One stream chunk. first: chat's opening delta carries the role. ri: add
 * the `het` object (first and last chunks). usage: a final chunk with
 * "choices":[] and the usage counts instead of text. */
char *het_api_chunk_json(enum het_api_kind kind, const struct het_api_result *res, bool first, bool usage,
                         const struct het_api_route_info *ri, size_t *len);
/* GET /v1/models */
char *het_api_models_json(const char *const *ids, int n, long long created, size_t *len);

#endif /* HET_SERVE_API_H */
