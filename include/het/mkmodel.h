/*
 * mkmodel.h — writing random-weight GGUF models of real shapes.
 *
 * Benchmarks and tests need models of real sizes (Qwen3-0.6B, ...) that are
 * too large to keep as fixtures. het_mkmodel_write() produces one: a llama,
 * qwen2, qwen3, qwen2moe or qwen3moe GGUF with the standard llama.cpp tensor names, keys and
 * layouts, seeded Gaussian weights (std 1/sqrt(ne0), the input dimension),
 * norm weights 1.0, and the tokenizer.* keys of a tokenizer GGUF so the file
 * tokenizes like the real model. Its output is meaningless text by design.
 *
 * The weights depend only on the seed and the tensor name (not on the thread
 * count or the weight type), so an F32 and a Q4_0 file written with the same
 * seed hold the same model at two precisions. Tensors are generated and
 * written one at a time; peak memory is about the largest tensor.
 */
#ifndef HET_MKMODEL_H
#define HET_MKMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"
#include "het/type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Called after each tensor is written (from the calling thread). */
typedef void (*het_mkmodel_progress_fn)(void *user, int64_t done, int64_t total, const char *tensor);

struct het_mkmodel_params {
    const char *path;        /* output file                                              */
    const char *arch;        /* "llama", "qwen2" or "qwen3"                              */
    const char *name;        /* general.name; NULL: made from arch and shape             */
    /* Tokenizer GGUF whose tokenizer.* keys are copied; n_vocab is its token
     * count. NULL: no tokenizer keys, and n_vocab must be set. */
    const char *vocab_path;
    int64_t     n_vocab;
    int         n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float       rope_base;   /* <arch>.rope.freq_base                                    */
    float       rms_eps;     /* <arch>.attention.layer_norm_rms_epsilon                  */
    bool        tied;        /* no output.weight: the output reuses token_embd           */
    /* Weight types. type: the 2-D layer weights (attn_*, ffn_*). embd_type:
     * token_embd.weight and output.weight; HET_TYPE_COUNT picks what
     * llama.cpp's quantiser does: the same as type for f32/f16/bf16/q8_0,
     * otherwise q6_k for output.weight and for a tied token_embd, and type for
     * an untied token_embd. Norms and biases are always f32. A tensor whose
     * row length is not a multiple of its type's block falls back (k-quants to
     * a 32-block type of similar size, others to f16); see the report. */
    enum het_type type;
    enum het_type embd_type;
    uint64_t    seed;
    int         n_threads;   /* 0: OpenMP default                                        */
    het_mkmodel_progress_fn progress;  /* optional */
    void       *progress_user;
    /* Mixture of experts (arch "qwen2moe" / "qwen3moe"): n_expert experts of
     * width n_ff_exp, n_expert_used per token; qwen2moe adds a shared expert
     * of width n_ff_shexp. The expert tensors are 3-D (ne0, ne1, n_expert). */
    int         n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
};

/* Filled by het_mkmodel_write on success (optional). */
struct het_mkmodel_report {
    int64_t  n_tensors;
    int64_t  n_params;       /* elements over all tensors                                */
    uint64_t file_bytes;
    int64_t  n_vocab;
    int      n_fallback;     /* tensors stored in another type than asked                */
    char     notes[1024];    /* "blk.0.ffn_down.weight: q4_K -> q5_0 (ne0 172); ..."      */
};

/* Preset shapes, e.g. "qwen3-0.6b", "tiny". */
struct het_mkmodel_preset {
    const char *name;
    const char *arch;
    int         n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float       rope_base, rms_eps;
    bool        tied;
    const char *vocab;       /* suggested tokenizer GGUF, relative to shared/ (hint only) */
    const char *description;
    int         n_expert, n_expert_used, n_ff_exp, n_ff_shexp; /* MoE presets only */
};

/* Defaults: arch "llama", type f32, embd_type auto (HET_TYPE_COUNT), seed 42,
 * rope_base 10000, rms_eps 1e-5; shape fields zero (set them or a preset). */
void het_mkmodel_params_init(struct het_mkmodel_params *p);
/* Copy a preset's shape, arch, rope and eps into p; false if unknown. */
bool het_mkmodel_params_preset(struct het_mkmodel_params *p, const char *preset);

int                              het_mkmodel_n_presets(void);
const struct het_mkmodel_preset *het_mkmodel_preset(int i);                /* NULL if out of range */
const struct het_mkmodel_preset *het_mkmodel_preset_find(const char *name); /* NULL if unknown     */

/* Write the model. err names the bad parameter or the I/O failure; on error
 * no partial file is left. */
enum het_status het_mkmodel_write(const struct het_mkmodel_params *p, het_error *err);
/* Same, also filling *report (may be NULL). */
enum het_status het_mkmodel_write_report(const struct het_mkmodel_params *p, struct het_mkmodel_report *report,
                                         het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_MKMODEL_H */
