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
#define HET_API_MAX_TOP_LOGPROBS 20    /* chat's top_logprobs limit; completions allow 5 */
#define HET_API_MAX_LOGIT_BIAS 1024
#define HET_API_MAX_N 16                /* choices per request ("n")            */

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
    int                  n;                /* choices (1..HET_API_MAX_N)          */
    bool                 stream, include_usage;
    bool                 ignore_eos;       /* extension: generate max_tokens      */
    int                  route;            /* -1: by policy ("het_route" field)   */
    float                presence_penalty, frequency_penalty; /* 0: off           */
    float                repeat_penalty;   /* 1: off (llama.cpp extension)        */
    int32_t              repeat_last_n;    /* -1 all, 0 off; default 64           */
    float                min_p;            /* 0: off                              */
    struct het_logit_bias *logit_bias;     /* owned; token ids not yet checked    */
    int                  n_logit_bias;
    bool                 logprobs;         /* report log-probabilities            */
    int                  top_logprobs;     /* alternatives per token (0..20)      */
    bool                 json_object;      /* response_format json_object         */
    const char          *user;             /* OpenAI's end-user id (logged)       */
    void                *root;             /* the parsed JSON; strings point in it */
};
/* Parse and validate. Every field either takes effect or is refused: an
 * unknown field, or one whose value asks for what is not supported (tools,
 * n > 16, json_schema, echo ...), is a 400 naming it. false: e says why. */
bool het_api_parse(const char *body, size_t len, enum het_api_kind kind, struct het_api_request *r,
                   struct het_api_error *e);
void het_api_request_free(struct het_api_request *r);

/* Where a request ran, for the `het` object. */
struct het_api_route_info {
    const char *route, *model, *devices, *reason;
    int32_t     threshold;     /* < 0: single route */
};

/* log-probabilities of one generated token and its alternatives */
struct het_api_logprob {
    const char *text;          /* the token's bytes (may not be UTF-8)        */
    size_t      len;
    float       logprob;
};
struct het_api_token {
    struct het_api_logprob        tok;
    const struct het_api_logprob *top;   /* n_top, most likely first         */
    int                           n_top;
    size_t                        offset; /* completions: text_offset         */
};

struct het_api_result {
    int         index;         /* the choice's index (n > 1)                 */
    const char *id;
    long long   created;
    const char *model;
    const char *text;          /* for chunks: the new text                    */
    size_t      len;
    const char *finish;        /* "stop", "length"; chunks: NULL while running */
    int32_t     prompt_tokens, completion_tokens;
    int32_t     cached_tokens;  /* of prompt_tokens, reused from a KV cache */
    double      ttft_ms, decode_ms;
    bool        logprobs;      /* add the choice's logprobs object           */
    const struct het_api_token *tokens;  /* the tokens of text               */
    int         n_tokens;
};
/* A whole (non-streamed) response. */
char *het_api_response_json(enum het_api_kind kind, const struct het_api_result *res,
                            const struct het_api_route_info *ri, size_t *len);
/* The same with n choices res[0..n) (usage: res[0]'s prompt, every choice's
 * completion tokens; the het object: res[0]'s timings). */
char *het_api_response_json_n(enum het_api_kind kind, const struct het_api_result *res, int n,
                              const struct het_api_route_info *ri, size_t *len);
/* One stream chunk. first: chat's opening delta carries the role. ri: add
 * the `het` object (first and last chunks). usage: a final chunk with
 * "choices":[] and the usage counts instead of text. */
char *het_api_chunk_json(enum het_api_kind kind, const struct het_api_result *res, bool first, bool usage,
                         const struct het_api_route_info *ri, size_t *len);
/* GET /v1/models */
char *het_api_models_json(const char *const *ids, int n, long long created, size_t *len);

#endif /* HET_SERVE_API_H */
