/*
 * model_impl.h — the insides of het_model, shared by the loader and the
 * architecture graph builders (internal to model/).
 */
#ifndef HET_MODEL_IMPL_H
#define HET_MODEL_IMPL_H

#include "het/model.h"

struct het_layer {
    struct het_tensor *attn_norm;   /* (n_embd)                          */
    struct het_tensor *wq;          /* (n_embd, n_head*head_dim)         */
    struct het_tensor *wk;          /* (n_embd, n_head_kv*head_dim)      */
    struct het_tensor *wv;          /* (n_embd, n_head_kv*head_dim)      */
    struct het_tensor *wo;          /* (n_head*head_dim, n_embd)         */
    struct het_tensor *bq, *bk, *bv;/* qwen2 biases, else NULL           */
    struct het_tensor *q_norm;      /* qwen3 (head_dim), else NULL       */
    struct het_tensor *k_norm;      /* qwen3 (head_dim), else NULL       */
    struct het_tensor *ffn_norm;    /* (n_embd)                          */
    struct het_tensor *w_gate;      /* (n_embd, n_ff)                    */
    struct het_tensor *w_up;        /* (n_embd, n_ff)                    */
    struct het_tensor *w_down;      /* (n_ff, n_embd)                    */
};

struct het_model {
    struct het_model_config cfg;
    het_gguf               *gguf;        /* owns the mapping the weights point into */
    het_tokenizer          *tok;
    struct het_tensor      *weights;     /* one per GGUF tensor                     */
    int                     n_weights;
    size_t                  weight_bytes;
    struct het_tensor      *tok_embd;    /* (n_embd, n_vocab)                       */
    struct het_tensor      *output_norm; /* (n_embd)                                */
    struct het_tensor      *output;      /* (n_embd, n_vocab); == tok_embd if tied  */
    struct het_layer       *layers;      /* n_layer                                 */
};

/* Build the forward graph for n_tok tokens at position n_past (arch_llama.c).
 * kv_k/kv_v: the cache tensors (head_dim, n_ctx, n_head_kv, n_layer), F16 or F32.
 * tokens/pos: input leaves the caller fills after allocation.
 * Returns the logits node ((n_vocab, n_out), flagged OUTPUT) or NULL. */
struct het_tensor *het_arch_llama_build(const struct het_model *m, het_graph *g, struct het_tensor *kv_k,
                                        struct het_tensor *kv_v, int32_t n_tok, int32_t n_past, bool all_logits,
                                        struct het_tensor **tokens, struct het_tensor **pos);

#endif /* HET_MODEL_IMPL_H */
