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
    /* mixture of experts (qwen2moe, qwen3moe; the dense FFN above is NULL) */
    struct het_tensor *ffn_gate_inp;   /* router (n_embd, n_expert)              */
    struct het_tensor *ffn_gate_exps;  /* (n_embd, n_ff_exp, n_expert)           */
    struct het_tensor *ffn_up_exps;    /* (n_embd, n_ff_exp, n_expert)           */
    struct het_tensor *ffn_down_exps;  /* (n_ff_exp, n_embd, n_expert)           */
    struct het_tensor *ffn_gate_inp_shexp; /* qwen2moe shared-expert gate (n_embd) */
    struct het_tensor *ffn_gate_shexp; /* (n_embd, n_ff_shexp)                   */
    struct het_tensor *ffn_up_shexp;   /* (n_embd, n_ff_shexp)                   */
    struct het_tensor *ffn_down_shexp; /* (n_ff_shexp, n_embd)                   */
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
    het_pool               *pool;        /* holds the weights when placed there     */
    struct het_slice        slice;       /* ... in this slice                        */
};

/* One sequence's share of a batch, for the graph builder. */
struct het_arch_seq {
    int32_t            first;   /* index of its first token in the batch   */
    int32_t            n_tok;
    int32_t            n_past;  /* tokens already in its cache             */
    struct het_tensor *kv_k;    /* (head_dim, n_ctx, n_head_kv, n_layer)   */
    struct het_tensor *kv_v;
};

/* Build the forward graph for a batch of n_tok tokens from n_seq sequences
 * (arch_llama.c). tokens/pos/out_rows are input leaves the caller fills after
 * allocation: token ids and positions (n_tok), and, unless all_logits, the
 * batch index of each sequence's last token (n_seq). Returns the logits node
 * ((n_vocab, n_out), flagged OUTPUT) or NULL. */
struct het_tensor *het_arch_llama_build(const struct het_model *m, het_graph *g, const struct het_arch_seq *seqs,
                                        int32_t n_seq, int32_t n_tok, bool all_logits, struct het_tensor **tokens,
                                        struct het_tensor **pos, struct het_tensor **out_rows);

/* Move g, built by het_arch_llama_build for the one sequence seq with
 * seq->n_tok tokens at n_past `from`, to the same batch at seq->n_past (any
 * other n_past of the same cache): the cache views (where the step's keys
 * and values are written, and the keys attention reads) and attention's
 * n_past are all that depend on it. Storage is left as a fresh build
 * leaves it (none on the tensors that own theirs: the scheduler assigns
 * scratch again). false, with g unchanged: g is not such a graph, or the
 * new views would leave the cache. */
bool het_arch_llama_advance(het_graph *g, const struct het_arch_seq *seq, int32_t from);

/* The MoE feed-forward block of layer L over x (n_embd, n_tok) (arch_moe.c):
 * routing as llama.cpp's build_moe_ffn, plus the shared expert when L has
 * one. Returns (n_embd, n_tok) or NULL (the graph's status says why). */
struct het_tensor *het_arch_moe_ffn(const struct het_model *m, het_graph *g, const struct het_layer *L,
                                    struct het_tensor *x, int il);
/* arch families */
static inline bool het_arch_is_moe(enum het_arch a) { return a == HET_ARCH_QWEN2MOE || a == HET_ARCH_QWEN3MOE; }
static inline bool het_arch_has_qkv_bias(enum het_arch a) { return a == HET_ARCH_QWEN2 || a == HET_ARCH_QWEN2MOE; }
static inline bool het_arch_has_qk_norm(enum het_arch a) { return a == HET_ARCH_QWEN3 || a == HET_ARCH_QWEN3MOE; }

#endif /* HET_MODEL_IMPL_H */
