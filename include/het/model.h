/*
 * model.h — a loaded model, and a context that evaluates tokens with it.
 *
 * Lifetimes follow llama2.c's split: het_model_config (hyperparameters) and
 * the weights (tensors pointing into the mapped GGUF, or into one slice of a
 * shared memory pool) live as long as the het_model; per-request state (KV
 * cache, graph, logits) lives in a het_context, several of which may share
 * one model.
 */
#ifndef HET_MODEL_H
#define HET_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/gguf.h"
#include "het/graph.h"
#include "het/pool.h"
#include "het/sched.h"
#include "het/status.h"
#include "het/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

enum het_arch {
    HET_ARCH_LLAMA = 0,
    HET_ARCH_QWEN2,
    HET_ARCH_QWEN3,
    HET_ARCH_QWEN2MOE,  /* qwen2 attention; MoE FFN + a sigmoid-gated shared expert */
    HET_ARCH_QWEN3MOE,  /* qwen3 attention; MoE FFN, top-k weights renormalised    */
    HET_ARCH_COUNT,
};

struct het_model_config {
    enum het_arch arch;
    char          arch_name[32];  /* general.architecture                     */
    int32_t       n_vocab;
    int32_t       n_ctx_train;    /* <arch>.context_length                    */
    int32_t       n_embd;
    int32_t       n_layer;
    int32_t       n_head;
    int32_t       n_head_kv;
    int32_t       head_dim;       /* <arch>.attention.key_length or n_embd/n_head */
    int32_t       n_ff;
    int32_t       n_rot;          /* rotary dims per head                     */
    float         rms_eps;
    float         rope_base;      /* default 10000                            */
    float         rope_scale;     /* freq_scale = 1 / linear scaling factor   */
    int           rope_mode;      /* enum het_rope_mode                       */
    bool          tied_output;    /* output projection is token_embd          */
    /* mixture of experts (0 / false for dense architectures) */
    int32_t       n_expert;       /* <arch>.expert_count                      */
    int32_t       n_expert_used;  /* <arch>.expert_used_count (k)             */
    int32_t       n_ff_exp;       /* <arch>.expert_feed_forward_length, else n_ff / k */
    int32_t       n_ff_shexp;     /* <arch>.expert_shared_feed_forward_length, else n_ff
                                     (qwen2moe's shared expert; 0 without one) */
    bool          expert_norm;    /* renormalise the k routing weights to sum 1
                                     (llama.cpp: true for qwen3moe, false for qwen2moe;
                                     no GGUF key carries it)                    */
};

typedef struct het_model het_model;

/* Load a GGUF model (mmap; weights are not copied). NULL on error. */
het_model *het_model_load(const char *path, het_error *err);
/* Load, then copy every weight into one slice of pool (het_model_place_in_pool).
 * pool NULL: same as het_model_load. */
het_model *het_model_load_into(const char *path, het_pool *pool, het_error *err);
void       het_model_free(het_model *m);   /* NULL is a no-op; gives the pool slice back */

/* Copy the weights' bytes out of the mapped file into one slice of pool (the
 * tensors keep their offsets relative to each other, so every GGUF alignment
 * holds) and point the tensors there. Call before het_model_prepare; the
 * pool must outlive the model. HET_ERR_NOMEM (model unchanged) when the
 * pool has no room; HET_ERR_INVALID when the weights are already in a pool
 * or already prepared. */
enum het_status het_model_place_in_pool(het_model *m, het_pool *pool, het_error *err);
/* The pool holding the weights, or NULL (they are used from the mapped file). */
het_pool       *het_model_pool(const het_model *m);

/* What a pool must hold for this model (het_model_pool_estimate): the
 * weights (unless they stay mapped: then only `needed` counts them), a
 * repacked copy per device that repacks, n_seq F16 KV caches of
 * n_ctx tokens and the scratch of a whole-context prefill. memfd and
 * udmabuf pages materialise only when written, so the repack allowance
 * (an upper bound) costs address space, not memory. */
struct het_pool_estimate_params {
    int32_t n_ctx;        /* tokens per sequence (0: min(train ctx, 4096))       */
    int32_t n_seq;        /* sequences (0: 1)                                     */
    int32_t n_ctx_min;    /* at least this many tokens (a planner's own context)  */
    int     n_repacking;  /* devices that keep a repacked copy of the weights     */
    bool    all_logits;   /* logits of every position of a prefill kept           */
    bool    weights_mapped; /* weights stay in the file's mapping (not in the pool) */
};
struct het_pool_estimate {
    size_t weights, repacked, kv, scratch; /* bytes of each part                  */
    size_t total;         /* the reservation: the parts, headroom, 2 MiB rounded  */
    size_t needed;        /* what will be written: total less the repack allowance */
    int32_t n_ctx, n_seq; /* the context the KV part was sized for                */
};
void het_model_pool_estimate(const het_model *m, const struct het_pool_estimate_params *p,
                             struct het_pool_estimate *out);

const struct het_model_config *het_model_get_config(const het_model *m);
const het_tokenizer           *het_model_tokenizer(const het_model *m);
const het_gguf                *het_model_gguf(const het_model *m);
size_t                         het_model_weight_bytes(const het_model *m);
/* the model's weight tensors (for device preparation and listings) */
int                            het_model_n_weights(const het_model *m);
struct het_tensor             *het_model_weight(const het_model *m, int i);
const char                    *het_arch_name(enum het_arch arch);
/* Let every device of s prepare the weights once (repack, upload, import). */
enum het_status                het_model_prepare(het_model *m, het_sched *s, het_error *err);

/* ---- context --------------------------------------------------------------
 * A context holds n_seq independent sequences (each with its own KV cache
 * slice). One eval runs a batch that may mix sequences: a new request's
 * prefill together with the running decodes (continuous batching). */
typedef struct het_context het_context;

struct het_context_params {
    int32_t    n_ctx;     /* KV cache length per sequence (0: min(train ctx, 4096)) */
    int32_t    n_seq;     /* sequences (0: 1)                                        */
    het_sched *sched;     /* device set to run on (not owned)                        */
    bool       kv_f32;    /* F32 KV cache instead of F16 (exact comparisons)        */
    het_pool  *pool;      /* KV caches as slices of this pool (not owned; normally
                             the scheduler's); NULL: host memory registered with
                             every device                                          */
};

het_context *het_context_init(het_model *m, const struct het_context_params *p, het_error *err);
void         het_context_free(het_context *c);

/* Evaluate n tokens of sequence 0 at its current position (appending to its
 * KV cache). all_logits: keep logits for every token, else only the last. */
enum het_status het_context_eval(het_context *c, const int32_t *tokens, int32_t n, bool all_logits,
                                 het_error *err);

/* One part of a batch: n_tok tokens of sequence seq, appended at its position. */
struct het_batch_part {
    int32_t        seq;
    int32_t        n_tok;
    const int32_t *tokens;
};
/* Evaluate several sequences in one graph (each sequence at most once).
 * Logits: one row per part (its last token), or every token with all_logits,
 * in part order. */
enum het_status het_context_eval_batch(het_context *c, const struct het_batch_part *parts, int32_t n_parts,
                                       bool all_logits, het_error *err);

/* Logits of the last eval: n_out rows of n_vocab floats. */
const float *het_context_logits(const het_context *c, int32_t *n_out);
int32_t      het_context_n_past(const het_context *c);          /* sequence 0 */
int32_t      het_context_seq_n_past(const het_context *c, int32_t seq);
int32_t      het_context_n_ctx(const het_context *c);
int32_t      het_context_n_seq(const het_context *c);
void         het_context_reset(het_context *c);                 /* forget every sequence */
void         het_context_seq_reset(het_context *c, int32_t seq);
/* Keep the first n tokens of sequence seq (n <= its length) and forget the
 * rest: the next eval continues from position n (prefix reuse). */
void         het_context_seq_keep(het_context *c, int32_t seq, int32_t n);
size_t       het_context_kv_bytes(const het_context *c);

/* ---- sampling -----------------------------------------------------------
 * Per step, in this order: logit_bias is added; the repetition penalties
 * look at the last penalty_last_n tokens given to het_sampler_accept (as
 * llama.cpp: a positive logit is divided by repeat_penalty, a negative one
 * multiplied; then count * frequency_penalty + (count > 0) *
 * presence_penalty is subtracted); with json_object, tokens that cannot
 * continue a valid JSON object are removed; then greedy (temp 0) or
 * temperature, top-k, top-p and min-p (drop tokens under min_p times the
 * most likely one's probability) before a seeded draw. Every field's zero
 * value means "off", so `{ .temp = 0 }` is plain greedy. */
struct het_logit_bias { int32_t token; float bias; };

struct het_sampler_params {
    float    temp;    /* 0 = greedy (argmax)          */
    int32_t  top_k;   /* 0 = off                      */
    float    top_p;   /* 1 (or 0) = off               */
    uint64_t seed;
    float    min_p;             /* 0 = off                                      */
    float    repeat_penalty;    /* 1 (or 0) = off                               */
    float    presence_penalty;  /* 0 = off                                      */
    float    frequency_penalty; /* 0 = off                                      */
    int32_t  penalty_last_n;    /* history the penalties see: 0: 64, -1: all    */
    const struct het_logit_bias *logit_bias;  /* copied at init                */
    int32_t  n_logit_bias;
    bool     json_object;       /* constrain the output to one JSON object      */
    const het_tokenizer *tok;   /* needed by json_object (token texts, EOG)     */
};
typedef struct het_sampler het_sampler;
/* NULL when out of memory, or json_object without tok. */
het_sampler *het_sampler_init(const struct het_sampler_params *p, int32_t n_vocab);
void         het_sampler_free(het_sampler *s);
int32_t      het_sampler_sample(het_sampler *s, const float *logits);
/* Record a token of the text for the penalties: each prompt token
 * (generated false) and each sampled one (generated true, which also
 * advances the JSON constraint) before sampling again. */
void         het_sampler_accept(het_sampler *s, int32_t token, bool generated);
/* json_object: the JSON object is complete (nothing more may follow). */
bool         het_sampler_json_done(const het_sampler *s);

/* Log-probabilities of the model's distribution (log-softmax of the raw
 * logits): that of `token`, and the k most likely tokens, most likely first
 * (top[] has room for k; k may be 0). Returns token's log-probability. */
struct het_token_logprob { int32_t token; float logprob; };
float        het_logprobs(const float *logits, int32_t n_vocab, int32_t token, int k,
                          struct het_token_logprob *top);
/* The first index of the largest logit (NaNs never are); 0 if there is none. */
int32_t      het_argmax(const float *logits, int32_t n);

#ifdef __cplusplus
}
#endif
#endif /* HET_MODEL_H */
