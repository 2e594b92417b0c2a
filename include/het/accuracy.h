/*
 * accuracy.h — how much a placement changes a model's output, and how
 * sensitive each group of nodes is to a lossy device (public).
 *
 * A lossy device computes an approximation of a node: the NPU quantises
 * activations to int8 (devices/npu/README.md states the per-matmul error
 * bound). What matters to a user is the effect at the logits, so accuracy
 * is measured there: for every position of a text, the KL divergence
 * KL(p_ref || p_test) between the softmax of a reference run (the CPU
 * alone) and of the placement under test, and whether their top-1 tokens
 * agree.
 *
 * A sensitivity table records, per group of nodes (a glob on node names,
 * as --pin takes them: "ffn_down.*", "attn_q.3", "logits"), the mean KL per
 * position measured with only that group on the lossy device. The planner
 * (het/plan.h) spends an accuracy budget with it, treating the KL of
 * groups as additive (the measured KL of several groups together was at
 * most their sum on every model tried, so the prediction is conservative).
 * Tables are JSON files kept beside the device profiles:
 *   { "format": "het-sensitivity", "version": 1, "model": "...",
 *     "device": "npu", "measured": true, "label": "...", "positions": 70,
 *     "groups": [ { "pattern": "attn_q.*", "kl": 2.0e-4, "top1": 0.96,
 *                   "nodes": 5 } ] }
 */
#ifndef HET_ACCURACY_H
#define HET_ACCURACY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/model.h"
#include "het/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Comparing logits                                                          */

struct het_accuracy {
    int32_t n_positions;
    int32_t n_agree;      /* positions whose top-1 (argmax) tokens agree        */
    double  top1;         /* n_agree / n_positions                              */
    double  kl_mean;      /* mean over positions of KL(p_ref || p_test), nats   */
    double  kl_max;
    int32_t kl_max_pos;   /* position of kl_max                                  */
};

/* KL(softmax(ref) || softmax(test)) of one row of n logits, in double.
 * INFINITY when test has a non-finite logit where ref is finite; NAN when
 * ref has a non-finite logit. */
double het_accuracy_kl(const float *ref, const float *test, int32_t n);

/* Compare n_pos rows of n_vocab logits. Optional per-position outputs:
 * kl[n_pos], and top[2 * n_pos] (the argmax of ref, then of test, per row). */
void het_accuracy_compare(const float *ref, const float *test, int32_t n_pos, int32_t n_vocab,
                          struct het_accuracy *out, double *kl, int32_t *top);

/* Evaluate tokens on ctx from an empty cache (ctx is reset) and copy every
 * position's logits into out (n x n_vocab floats), chunk tokens per eval:
 * 1 gives decode graphs, more prefill graphs of that many tokens (the last
 * one shorter), <= 0 one eval of all n. The context needs n_ctx >= n. */
enum het_status het_accuracy_logits(het_context *ctx, int32_t n_vocab, const int32_t *tokens, int32_t n,
                                    int32_t chunk, float *out, het_error *err);

/* ---------------------------------------------------------------------------
 * Sensitivity tables                                                        */

#define HET_SENSITIVITY_MAX 64

struct het_sensitivity_group {
    char    pattern[64];   /* glob on node names                                  */
    double  kl;            /* mean KL per position with this group on the device   */
    double  top1;          /* top-1 agreement measured with it (NAN: estimated)     */
    int32_t n_nodes;       /* nodes it matched when measured (0: unknown)           */
};

struct het_sensitivity {
    char    model[256];    /* the model it describes (file name)                   */
    char    device[32];    /* the lossy device                                      */
    char    label[160];    /* "measured ... over N positions" or "estimated ..."    */
    bool    measured;
    int32_t n_positions;   /* positions the KL was averaged over (0: estimated)     */
    int32_t n_groups;
    struct het_sensitivity_group groups[HET_SENSITIVITY_MAX];
};

/* Append a group; HET_ERR_INVALID when full or the pattern is too long. */
enum het_status het_sensitivity_add(struct het_sensitivity *s, const char *pattern, double kl, double top1,
                                    int32_t n_nodes, het_error *err);

/* JSON (jansson; without it HET_ERR_UNSUPPORTED). Errors name the field:
 * "groups[2].kl: expected a non-negative number". */
enum het_status het_sensitivity_save(const struct het_sensitivity *s, const char *path, het_error *err);
enum het_status het_sensitivity_load(const char *path, struct het_sensitivity *out, het_error *err);
enum het_status het_sensitivity_from_json(const char *text, size_t len, const char *origin,
                                          struct het_sensitivity *out, het_error *err);

/* The cache file for a model on a lossy device:
 * $XDG_CACHE_HOME/het/profiles/sensitivity-<hash>.json (default ~/.cache),
 * the hash over model_id (e.g. path, size and mtime) and the device name. */
enum het_status het_sensitivity_cache_path(const char *model_id, const char *device, char *buf, size_t size,
                                           het_error *err);
/* Store s there (creating the folders). */
enum het_status het_sensitivity_cache_store(const struct het_sensitivity *s, const char *model_id,
                                            het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_ACCURACY_H */
