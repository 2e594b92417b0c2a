/*
 * session.h — a model ready to run, opened in one call (public).
 *
 * A het_session owns, opened in this order:
 *   1. the model (the GGUF file, mapped);
 *   2. the devices of a spec list ("cpu", "cpu,vulkan", "vulkan:1", "npu:emulate");
 *   3. the memory pool every device imports, sized for the model, the context
 *      length and the number of sequences (het_model_pool_estimate); the
 *      weights stay in the file's mapping, registered with every device
 *      beside the pool (weights_in_pool copies them in);
 *   4. with more than one device, a cost profile per device
 *      (het_profiles_acquire: --profile files, the cache, the NPU's cost
 *      model, or a quick first-use calibration, stored for next time);
 *   5. the scheduler (placement policy, pins) and each device's prepared
 *      weights;
 *   6. with an accuracy budget, the sensitivity table it is spent with
 *      (het/accuracy.h: a file, the cache, or measured now against the CPU
 *      alone and cached);
 *   7. optionally a context of n_parallel sequences of n_ctx tokens.
 *
 * hetrun's commands, `hetrun serve` and library users all open models this
 * way. Errors come back in het_error with the step that failed; notices
 * (a calibration starting, fallbacks) go to the optional log callback.
 *
 *     struct het_session_params p = { .model_path = "m.gguf", .open_context = true };
 *     het_session *s = het_session_open(&p, &err);
 *     het_context_eval(het_session_context(s), ids, n, false, &err);
 */
#ifndef HET_SESSION_H
#define HET_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/accuracy.h"
#include "het/graph.h"
#include "het/device.h"
#include "het/model.h"
#include "het/pool.h"
#include "het/profile.h"
#include "het/sched.h"
#include "het/status.h"
#include "het/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library ("0.1.0"); HET_VERSION (het/version.h) is the
 * version of the headers compiled against. */
const char *het_version(void);

typedef struct het_session het_session;

struct het_session_params {
    const char *model_path;      /* GGUF file (required)                                   */
    /* devices */
    const char *devices;         /* comma-separated specs in priority order, "auto" among
                                    them (het/device.h; NULL: "auto", every usable device) */
    int         n_threads;       /* CPU threads (0: physical cores)                        */
    bool        f32_activations; /* CPU matmuls keep F32 activations (exact, slower)       */
    const char *npu_mode;        /* mode of an "npu" spec without ":MODE": "hardware",
                                    "emulate" (NULL: hardware)                             */
    /* placement */
    const char *policy;          /* "fastest" (NULL), "first", "single:DEV", "alternate"   */
    const char *pins;            /* "PATTERN=DEV[,...]" globs on node or op names          */
    bool        strict;          /* a fallback is an error                                 */
    bool        overlap;         /* overlap independent splits on different devices        */
    /* profiles (used when there is more than one device) */
    const char *profiles;        /* "FILE[,FILE]" to use, "default" for the unmeasured
                                    defaults; NULL: cache, else calibrate                  */
    bool        recalibrate;     /* measure again even when a profile is cached            */
    bool        no_calibration;  /* never calibrate: unmeasured defaults when not cached   */
    bool        test_disturbed;  /* (testing) het_calibrate_params.test_disturbed           */
    /* accuracy budget (lossy devices: the NPU) */
    bool        has_accuracy_budget;
    double      accuracy_budget; /* mean KL per position (nats) the lossy devices may add  */
    const char *sensitivity;     /* FILE, "measure", "estimate"; NULL: cache, else measure */
    /* memory */
    const char *pool_backings;   /* "auto" (NULL), an order ("dmaheap,memfd"), or "off":
                                    weights used from the mapped file, no pool            */
    size_t      pool_bytes;      /* 0: het_model_pool_estimate                              */
    bool        weights_in_pool; /* copy the weights into the pool; false (the default):
                                    leave them in the file's mapping, never copied, and
                                    let repacking devices give its pages back           */
    /* contexts (what the pool is sized for; the context opened with open_context) */
    int32_t     n_ctx;           /* tokens per sequence (0: min(train context, 4096))     */
    int32_t     n_parallel;      /* sequences (0: 1)                                       */
    int32_t     n_ctx_min;       /* the pool holds contexts of at least this many tokens  */
    bool        all_logits;      /* the pool holds logits for every position of a prefill */
    bool        open_context;    /* open het_session_context                                */
    /* (optional) notices: a calibration starting, a measurement taken, fallbacks */
    void      (*log)(void *user, const char *line);
    /* (optional) online correction's notices: a plan missing its prediction, re-planning */
    void      (*log_info)(void *user, const char *line);
    /* (optional) progress of a first-use calibration */
    void      (*progress)(void *user, double fraction, const char *what);
    void       *user;
};

/* NULL on error; err says which step failed ("model.gguf: ...", "device
 * 'vulkan:3': ...", "KV cache ...: needs 1.2 GiB ... (lower --ctx or
 * --parallel)"). */
het_session *het_session_open(const struct het_session_params *p, het_error *err);
void         het_session_close(het_session *s);   /* NULL is a no-op */

het_model   *het_session_model(const het_session *s);
het_sched   *het_session_sched(const het_session *s);
het_pool    *het_session_pool(const het_session *s);      /* NULL with pool_backings "off" */
het_context *het_session_context(const het_session *s);   /* NULL unless open_context     */
int          het_session_n_devices(const het_session *s);
het_device  *het_session_device(const het_session *s, int i);
/* device i's profile (NULL with one device: it needs no cost model) */
const het_profile *het_session_profile(const het_session *s, int i);
/* Device i's counters since the end of set-up (the budget's measuring runs excluded). */
void         het_session_device_stats(const het_session *s, int i, struct het_device_stats *out);

/* The accuracy budget as the session applies it (NULL: none asked for). */
struct het_session_budget {
    double      budget_kl;
    bool        active;          /* the scheduler plans with it                          */
    const char *why_not;         /* when not active: why it has no effect                */
    char        lossy[32];       /* the lossy device ("" none)                           */
    struct het_sensitivity sens; /* the table spent                                      */
    char        source[4200];    /* where the table came from                            */
};
const struct het_session_budget *het_session_budget(const het_session *s);

/* One device from a spec: "cpu", "vulkan", "vulkan:N", "npu" or "npu:MODE"
 * (with p's threads, F32 activations, NPU mode and the model path as the
 * NPU's repack cache key; npu_default when neither the spec nor p names a
 * mode). */
het_device *het_session_device_init(const struct het_session_params *p, const char *spec, const char *npu_default,
                                    het_error *err);
/* The same for a list of specs where "auto" is every usable device
 * (het_devices_open); cands (optional) receives what auto considered. */
enum het_status het_session_devices_open(const struct het_session_params *p, const char *list, const char *npu_default,
                                         het_device **out, int max, int *n, struct het_device_candidate *cands,
                                         int *n_cands, het_error *err);

/* A policy name (het_policies[], het/plan.h: "fastest" (NULL), "first",
 * "single:DEV", "alternate") onto sp->policy and sp->policy_device. */
enum het_status het_policy_parse(const char *spec, het_device *const *devs, int n, struct het_sched_params *sp,
                                 het_error *err);

/* ---- accuracy measurement (runtime/sensitivity.c) ---------------------------
 * What the budget (and `hetrun plan --accuracy`) measure against: the CPU
 * alone, in a session of its own (own mapping, own device), so nothing the
 * placement's devices prepared is shared with the reference. */

/* The built-in measuring text (stories260K's reference continuation of
 * "Once upon a time"). */
const char *het_accuracy_default_text(void);

/* Logits of every position of tokens[n] (n x n_vocab into out) from the
 * model of p on the CPU alone (p's model path and threads; nothing else of
 * p is used), chunk tokens per eval as het_accuracy_logits. */
enum het_status het_reference_logits(const struct het_session_params *p, const int32_t *tokens, int32_t n,
                                     int32_t chunk, float *out, het_error *err);

struct het_sensitivity_request {
    const char *source;          /* FILE, "measure", "estimate"; NULL: the cache, else
                                    measure_missing ? measured now : estimated          */
    bool        measure_missing;
    const struct het_session_params *ref; /* model path (cache key) and threads of the
                                    CPU reference                                       */
    const int32_t *tokens;       /* the measuring text, BOS included                     */
    int32_t     n_tokens;
    const float *ref_logits;     /* (optional) its CPU logits from one eval (chunk 0);
                                    NULL: computed when measuring                       */
    het_device *const        *devices;  /* the set measured on                         */
    const het_profile *const *profiles;
    int         n_devices;
    int         lossy, exact;    /* indices of a lossy and an exact device (-1: none)    */
    het_sched  *sched;           /* a scheduler of that set (supports queries)            */
    void      (*log)(void *user, const char *line); /* one line when a measurement is done */
    void       *user;
};

/* The sensitivity table for graph g (its nodes the lossy device can run, by
 * class "attn_q.*"): loaded from source, the cache, measured (each class
 * alone on the lossy device, everything else on the exact one, mean KL
 * against the CPU alone; stored in the cache), or estimated
 * (HET_PLAN_DEFAULT_NODE_KL per node). source_out (cap bytes) says where it
 * came from. */
enum het_status het_sensitivity_acquire(het_model *m, const het_graph *g, const struct het_sensitivity_request *r,
                                        struct het_sensitivity *out, char *source_out, size_t cap, het_error *err);

/* Class of a node name: "attn_q.3" -> "attn_q.*", "logits" -> "logits". */
void het_node_class(const char *name, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* HET_SESSION_H */
