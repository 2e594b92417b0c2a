/*
 * profile.h — measured cost models of a device (public view).
 *
 * A het_profile describes one device as the planner sees it: per op class
 * and weight type a fitted model of a node's time, the raw samples the fit
 * came from (kept, so a fit can be checked and redone), the device's
 * roofline (peak bandwidth, peak arithmetic), the fixed cost of one split
 * (submit + fence), and the hand-off cost to every other device it was
 * calibrated against. Times are double microseconds everywhere; NAN means
 * "not known" (never calibrated), and callers decide what to do about it.
 *
 * The fitted model of one (op class, weight type) is
 *     t(µs) = t0 + max(flops / F(M), bytes / B),   F(M) = F_peak * M / (M + m_half)
 * (or F(M) tabulated at the measured M, see het_cost_fit)
 * where M is the number of activation rows (tokens) the node processes:
 * small-M matmuls cannot use a device's full arithmetic rate, large ones
 * become compute-bound, tiny ones are launch-bound (t0).
 *
 * Profiles are JSON files (policy/profile.c) stored per device identity
 * (name, description, het version) under $XDG_CACHE_HOME/het/profiles/;
 * calibration (policy/calibrate.c) writes them, the planner (het/plan.h)
 * only reads them. An unmeasured default exists for every device kind and
 * says so in its label.
 */
#ifndef HET_PROFILE_H
#define HET_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/device.h"
#include "het/graph.h"
#include "het/status.h"
#include "het/type.h"

#ifdef __cplusplus
extern "C" {
#endif

enum het_op_class {
    HET_OPCLASS_MATMUL = 0, /* mul_mat, one model per weight type                 */
    HET_OPCLASS_ATTN,       /* fused attention, per KV type                         */
    HET_OPCLASS_NORM,       /* rms_norm                                            */
    HET_OPCLASS_ROPE,       /* rope                                                */
    HET_OPCLASS_SOFTMAX,    /* softmax                                             */
    HET_OPCLASS_ELTWISE,    /* add, mul, scale, silu, swiglu                       */
    HET_OPCLASS_COPY,       /* cpy, cont, get_rows                                 */
    HET_OPCLASS_MOE,        /* mul_mat_id (experts), one model per weight type;
                               a profile without one predicts with its matmul model */
    HET_OPCLASS_COUNT,
    HET_OPCLASS_NONE = -1,  /* views and leaves: no work                           */
};

const char       *het_op_class_name(enum het_op_class c);      /* "matmul", ...      */
enum het_op_class het_op_class_from_name(const char *name);     /* NONE if unknown   */

/* What a node costs, independent of any device: the inputs of a fit. */
struct het_op_cost {
    enum het_op_class cls;
    enum het_type     wtype;   /* matmul: weight type; attn: K type; else F32 */
    double            flops;   /* arithmetic operations                       */
    double            bytes;   /* bytes read + written                        */
    double            m;       /* activation rows (tokens); 1 for decode       */
    double            calls;   /* kernel calls it costs, each paying the fit's
                                  t0 (mul_mat_id: the expected experts hit, one
                                  GEMM or NPU dispatch each); 0 means 1        */
};
/* Describe node (any op). cls is HET_OPCLASS_NONE for views and leaves. */
void het_op_cost_of(const struct het_tensor *node, struct het_op_cost *out);
/* Expected distinct experts hit when T tokens each pick k of E uniformly:
 * E * (1 - (1 - k/E)^T) (k for one token). Which experts a mul_mat_id
 * reads depends on the router's output, unknown when planning, so its cost
 * (class moe) uses this count: bytes = hit experts' weights + activations,
 * flops = 2·K·N·k·T, M = k·T / hit (columns per expert GEMM). */
double het_moe_expected_experts(double E, double k, double T);
/* The cost of a mul_mat_id node when `hit` of its experts are read (the
 * router's actual or observed count; hit <= 0: the expected count). */
void   het_op_cost_with_experts(const struct het_tensor *node, double hit, struct het_op_cost *out);

/* One measurement: the node's features and its median time. */
struct het_profile_sample {
    double m, flops, bytes;  /* as in het_op_cost                               */
    double us;               /* median time per node, microseconds              */
    double spread;           /* (p75 - p25) / median of the repetitions kept    */
    double calls;            /* as in het_op_cost (moe: experts hit); 0 means 1 */
};

#define HET_FIT_MAX_KNOTS 16

/* The fitted model of one (op class, weight type); see the file comment.
 * When the samples sweep M, F(M) is tabulated instead (knots, interpolated
 * log-log, constant past the last): kernels change code path with M (a GEMV
 * for one row, int8 panels from four), which no smooth curve follows. */
struct het_cost_fit {
    double t0_us;    /* fixed cost per node, µs                          */
    double gbps;     /* B: bandwidth, GB/s (1e9 bytes/s)                   */
    double gflops;   /* F_peak: arithmetic rate at large M, GFLOP/s        */
    double m_half;   /* M at which half of F_peak is reached               */
    double error;    /* rms of (predicted/measured - 1) over the samples  */
    int    n_knots;  /* 0: F(M) = F_peak * M / (M + m_half)                */
    double knot_m[HET_FIT_MAX_KNOTS];       /* increasing M               */
    double knot_gflops[HET_FIT_MAX_KNOTS];  /* F at knot_m, GFLOP/s         */
};
/* F(M) of a fit, GFLOP/s */
double het_cost_fit_rate(const struct het_cost_fit *fit, double m);
/* µs the model predicts for cost (no NAN handling: fit must be valid) */
double het_cost_fit_eval(const struct het_cost_fit *fit, const struct het_op_cost *cost);

/* Hand-off from this device to another: fixed + bytes / gbps (gbps 0 = no copy). */
struct het_handoff {
    char   to[32];       /* peer device name                              */
    double fixed_us;     /* fence + cache maintenance, µs                  */
    double gbps;         /* copy rate where memory is not shared; 0: none  */
};

typedef struct het_profile het_profile;

/* ---------------------------------------------------------------------------
 * Construction and identity                                                 */

/* An empty profile (no fits) for a device identity; NULL on out of memory. */
het_profile *het_profile_new(const char *dev_name, const char *dev_desc, enum het_device_kind kind, bool emulated);
/* The same for an open device. */
het_profile *het_profile_new_for_device(const het_device *dev);
/* The device's unmeasured default: its own cost model (the NPU's), else a
 * roofline profile from the figures its backend claims; its label starts
 * with "unmeasured". NULL on out of memory. */
het_profile *het_profile_default(const het_device *dev);
/* An unmeasured roofline profile for a device identity and its caps (one fit
 * per op class at the figures; matmul half-rate at M = 8), labelled
 * "unmeasured default (<r->source>)". NULL on out of memory. */
het_profile *het_profile_from_roofline(const char *dev_name, const char *dev_desc, enum het_device_kind kind,
                                       const struct het_device_caps *caps, const struct het_roofline *r);
/* Copy what the planner needs of a device's caps (async, lossy,
 * shares_cpu_cores) into p's device costs. */
void         het_profile_set_caps(het_profile *p, const struct het_device_caps *caps);
het_profile *het_profile_clone(const het_profile *p);
void         het_profile_free(het_profile *p);   /* NULL is a no-op */

const char          *het_profile_device_name(const het_profile *p);
const char          *het_profile_device_desc(const het_profile *p);
enum het_device_kind het_profile_device_kind(const het_profile *p);
const char          *het_profile_het_version(const het_profile *p);
/* measured (calibrated on the device) or an unmeasured default */
bool                 het_profile_is_measured(const het_profile *p);
/* one line: "measured on <date>, N samples" / "unmeasured default (...)" */
const char          *het_profile_label(const het_profile *p);
void                 het_profile_set_label(het_profile *p, bool measured, const char *label);
/* True when p was made for this device and this het version (reusable). */
bool                 het_profile_matches(const het_profile *p, const het_device *dev);
/* Rename the device a profile describes (simulation: plan for "npu" with a copied profile). */
void                 het_profile_set_device_name(het_profile *p, const char *name);

/* ---------------------------------------------------------------------------
 * Device-wide figures                                                       */

struct het_profile_device_costs {
    double split_us;          /* one run_split + sync with a trivial node, beyond the node    */
    double kernel_switch_us;  /* changing kernel between consecutive nodes (NPU: ~2 ms)      */
    bool   async;             /* run_split returns before completion (overlaps the host)    */
    bool   lossy;             /* approximates: placed under the accuracy budget               */
    bool   shares_cpu_cores;  /* runs on the CPU's cores: competes with the CPU, never overlaps it */
    double peak_gbps;         /* roofline: best bandwidth seen or specified                  */
    double peak_gflops;       /* roofline: best arithmetic rate seen or specified            */
};
void het_profile_get_device_costs(const het_profile *p, struct het_profile_device_costs *out);
void het_profile_set_device_costs(het_profile *p, const struct het_profile_device_costs *c);

/* ---------------------------------------------------------------------------
 * Models and samples                                                        */

/* The fit of (cls, wtype); false when there is none. */
bool het_profile_get_fit(const het_profile *p, enum het_op_class cls, enum het_type wtype, struct het_cost_fit *out);
enum het_status het_profile_set_fit(het_profile *p, enum het_op_class cls, enum het_type wtype,
                                    const struct het_cost_fit *fit, het_error *err);
enum het_status het_profile_add_sample(het_profile *p, enum het_op_class cls, enum het_type wtype,
                                       const struct het_profile_sample *s, het_error *err);
/* Samples of (cls, wtype): *n receives the count; NULL when none. */
const struct het_profile_sample *het_profile_samples(const het_profile *p, enum het_op_class cls,
                                                     enum het_type wtype, int *n);
/* Refit every model that has samples (policy/fit.c); updates the roofline. */
enum het_status het_profile_refit(het_profile *p, het_error *err);
/* Enumerate the models: i in [0, n); false past the end. */
int  het_profile_n_models(const het_profile *p);
bool het_profile_model_at(const het_profile *p, int i, enum het_op_class *cls, enum het_type *wtype,
                          struct het_cost_fit *fit, int *n_samples);

/* ---------------------------------------------------------------------------
 * Prediction                                                                */

/* µs for node on this device; NAN when the profile has no model for it. */
double het_profile_predict(const het_profile *p, const struct het_tensor *node);
double het_profile_predict_cost(const het_profile *p, const struct het_op_cost *cost);
/* Roofline guess (device-wide peaks, no per-class fit): never NAN for a
 * profile with a roofline; what the planner uses when predict is NAN. */
double het_profile_predict_roofline(const het_profile *p, const struct het_op_cost *cost);
/* Does the profile know how to cost node? (a fit for its class and type) */
bool   het_profile_has_model(const het_profile *p, const struct het_tensor *node);

/* ---------------------------------------------------------------------------
 * Learning while used (policy/history.c): history models, StarPU-style.
 * The scheduler times nodes on the devices (sched/online.c) and records
 * each time here; per (op class, weight type, shape bucket) the profile
 * keeps the last HET_HISTORY_RING ratios observed / fitted and applies a low
 * quantile of them to its predictions once HET_HISTORY_MIN_OBS are in. The
 * generation changes whenever an applied ratio moves by more than
 * HET_HISTORY_MARGIN (then plans made from the profile are out of date).
 * Histories are saved with the profile.                                     */

#define HET_HISTORY_RING    8
#define HET_HISTORY_MIN_OBS 2
#define HET_HISTORY_MARGIN  0.3

/* The history bucket of a cost (class, type, rows and work bucketed): equal
 * values share one history model. */
uint32_t        het_op_cost_bucket(const struct het_op_cost *cost);
/* Record that a node costing cost took us µs on this device. */
enum het_status het_profile_observe(het_profile *p, const struct het_op_cost *cost, double us, het_error *err);
/* The learned factor applied to cost's prediction (1: none). */
double          het_profile_history_factor(const het_profile *p, const struct het_op_cost *cost);

/* What a prediction of cost rests on. */
struct het_history_stat {
    double   fit_us;       /* the calibrated fit's (or roofline's) prediction           */
    double   observed_us;  /* its own bucket's estimate from observations (NAN: none)   */
    int      n_obs;        /* observations in its own bucket                            */
    double   factor;       /* factor applied to fit_us (1: none)                         */
    int      n_applied;    /* observations behind the applied factor                     */
    bool     borrowed;     /* the factor comes from a neighbouring bucket                */
    uint64_t serial;       /* when its bucket was last observed (0: never)               */
};
void     het_profile_history_of(const het_profile *p, const struct het_op_cost *cost, struct het_history_stat *out);
uint64_t het_profile_generation(const het_profile *p);
uint64_t het_profile_n_observations(const het_profile *p);

/* Enumerate the history models. */
struct het_history_info {
    enum het_op_class cls;
    enum het_type     wtype;
    int               m_lo, m_hi;     /* rows covered                              */
    int               size_log4;      /* work bucket: ~4^size_log4 bytes            */
    int               n_obs;
    double            estimate;       /* current low quantile of observed/fitted    */
    double            applied;        /* the factor in use (NAN: none yet)          */
};
int  het_profile_n_history(const het_profile *p);
bool het_profile_history_at(const het_profile *p, int i, struct het_history_info *out);

/* ---------------------------------------------------------------------------
 * Calibration quality                                                       */

/* Why calibration distrusts this profile (NULL: it does not): samples that
 * stayed noisy after re-measuring. het_profile_cache_store refuses such a
 * profile (HET_ERR_INVALID, with this text). */
const char *het_profile_noisy(const het_profile *p);
void        het_profile_set_noisy(het_profile *p, const char *why);   /* NULL or "": clean */

/* ---------------------------------------------------------------------------
 * Hand-offs                                                                 */

enum het_status het_profile_set_handoff(het_profile *p, const struct het_handoff *h, het_error *err);
/* Hand-off to device `to`; false when never measured. */
bool het_profile_get_handoff(const het_profile *p, const char *to, struct het_handoff *out);
int  het_profile_n_handoffs(const het_profile *p);
const struct het_handoff *het_profile_handoff_at(const het_profile *p, int i);

/* ---------------------------------------------------------------------------
 * Files                                                                     */

/* Serialise as one JSON object (malloc'ed string; free()). NULL on error. */
char           *het_profile_to_json(const het_profile *p, het_error *err);
/* Parse one profile object. origin names the source in error messages;
 * errors name the offending JSON field ("models[2].gbps: expected a number"). */
het_profile    *het_profile_from_json(const char *text, size_t len, const char *origin, het_error *err);
enum het_status het_profile_save(const het_profile *p, const char *path, het_error *err);
het_profile    *het_profile_load(const char *path, het_error *err);
/* A file holding one profile or a set ({"profiles": [...]}): up to max
 * profiles into out (caller frees each); *n receives the count. */
enum het_status het_profile_load_all(const char *path, het_profile **out, int max, int *n, het_error *err);
/* Write several profiles as one set file (simulation inputs). */
enum het_status het_profile_save_all(het_profile *const *p, int n, const char *path, het_error *err);

/* The cache file for a device identity:
 * $XDG_CACHE_HOME/het/profiles/<name>-<hash>.json (default ~/.cache). */
enum het_status het_profile_cache_path(const char *dev_name, const char *dev_desc, char *buf, size_t size,
                                       het_error *err);
/* Load the cached profile of dev if it matches (device and het version):
 * NULL with err->status HET_ERR_IO when there is none or it is stale. */
het_profile    *het_profile_cache_load(const het_device *dev, het_error *err);
/* Store p in the cache (creating the folders). A profile calibration marked
 * noisy (het_profile_noisy) is refused: HET_ERR_INVALID naming why. */
enum het_status het_profile_cache_store(const het_profile *p, het_error *err);

/* An NPU's profile from its cost-model parameters (devices/npu/npu_profile.c):
 * the NPU formula sampled over model shapes and fitted. Never timed: the
 * emulated NPU's wall time is the CPU's. Labelled unmeasured. */
struct het_npu_profile;
het_profile *het_profile_from_npu(const struct het_npu_profile *np, const char *dev_name, const char *dev_desc,
                                  het_error *err);

/* What-if machines (policy/profile_what_if.c): profiles of hardware het is
 * for but that is not here ("ryzen-ai-7040": Zen 4 CPU, Radeon 780M, XDNA1
 * NPU), built from published figures and the seeds' measurements, labelled
 * "what-if NAME (unmeasured): <figures>". Up to max profiles into out (owned
 * by the caller); HET_ERR_INVALID for an unknown name. */
enum het_status het_profile_what_if(const char *machine, het_profile **out, int max, int *n, het_error *err);
const char     *het_profile_what_if_desc(const char *machine); /* one line; NULL: no such machine   */
const char     *het_profile_what_if_name(int i);               /* the i-th machine, NULL past the end */

/* ---------------------------------------------------------------------------
 * Calibration (policy/calibrate.c): microbenchmarks through the device
 * vtable, exactly as the scheduler runs splits.                             */

/* What a model needs measured: its matmul weights and widths. */
#define HET_CALIBRATE_MAX_SHAPES 12
struct het_calibrate_shape {
    enum het_type type;
    int64_t       k, n;        /* row length, rows (the weight is n x k)                 */
    bool          output;      /* the vocabulary projection: decode-only (M = 1 .. 4)   */
};
struct het_calibrate_needs {
    int      n_shapes;
    struct het_calibrate_shape shapes[HET_CALIBRATE_MAX_SHAPES];
    int      row_width;        /* elements per row of norms and element-wise ops (n_embd) */
    int      head_dim, n_head, n_head_kv;
    int      max_rows;         /* largest batch the planner will see (prefill); 0: 512   */
    bool     no_softmax;       /* the model has no softmax node: the class is not measured */
    /* mixture of experts (n_expert 0: none): the experts' matrices (k x n
     * per expert, by type), how many there are and how many a token uses */
    int      n_expert, n_expert_used;
    int      n_moe_shapes;
    struct het_calibrate_shape moe_shapes[4];
};
struct het_model;
/* What planning the model needs: its distinct weight matrices (by type and
 * shape), its widths and heads. */
void het_calibrate_needs_of_model(const struct het_model *m, struct het_calibrate_needs *out);
/* Drop from needs the expert shapes dev cannot run as mul_mat_id (e.g.
 * experts larger than one Vulkan descriptor): nothing can be measured for
 * them, and a profile must not be found lacking them at every start. */
void het_calibrate_needs_for(het_device *dev, struct het_calibrate_needs *needs);
/* Does p have a model for every op class and samples of every needed
 * matmul shape, and of every expert shape (class moe) of a MoE model?
 * (else calibrate with params.base = p to add the rest) */
bool het_profile_covers(const het_profile *p, const struct het_calibrate_needs *needs);

struct het_calibrate_params {
    bool     quick;         /* fewer types, shapes and repetitions (~seconds)       */
    uint32_t types_mask;    /* (optional) matmul weight types, bit = enum het_type;
                               0 = f32, f16, q8_0, q4_0, q4_K, q6_K (with needs: the
                               model's own)                                         */
    double   max_node_ms;   /* stop a sweep once one node takes longer (0: 30/200)  */
    /* (optional) progress: fraction in [0,1] and what is being measured */
    void   (*progress)(void *user, double fraction, const char *what);
    void    *progress_user;
    /* (optional) measure only what planning this model needs (its weight
     * types and shapes, widths, heads) instead of a generic set */
    const struct het_calibrate_needs *needs;
    /* (optional) a profile of this device to extend: what it already has
     * (models per class and type, matmul shapes, split overhead) is kept and
     * not measured again */
    const het_profile *base;
    /* (optional, out) how the measurement went */
    struct het_calibrate_report *report;
    /* (testing) count every repetition as disturbed by other work, as on a
     * machine that is always busy, so the refusal path can be tested
     * without load (hetrun sets it from HET_TEST_DISTURBED=1) */
    bool     test_disturbed;
};

/* Where a calibration's time went, per stage (the split overhead, each
 * small op, attention, each matmul or expert shape). */
#define HET_CALIBRATE_MAX_STAGES 24
struct het_calibrate_stage {
    char   name[48];
    double seconds;        /* wall time of the stage                                        */
    double setup_seconds;  /* of which making graphs, weights and preparing them            */
    double warmup_seconds; /* of which first runs (a Vulkan device compiles pipelines then)  */
    int    points;         /* points timed, re-measurements included                        */
    int    runs;           /* graph runs, warm-ups included                                 */
    int    builds;         /* kernels the device built during the stage (stats.n_builds)    */
    double build_seconds;  /* of the stage's time, building them (stats.build_us)           */
};

struct het_calibrate_report {
    int  n_samples;        /* samples kept                                                  */
    int  n_remeasured;     /* measurements repeated: disturbed, or off their neighbours' trend */
    int  n_noisy;          /* samples still disturbed after re-measuring (kept, counted)    */
    int  n_outliers;       /* samples still off the trend after re-measuring (dropped)      */
    int  n_reused;         /* models taken from params.base                                 */
    bool noisy;            /* the profile is marked noisy (het_profile_noisy): not cached   */
    double busy_share;     /* share of the CPUs' time other processes used while the samples */
                           /* left disturbed were measured (-1: none, or not known); under */
                           /* a tenth, they were the device's own doing and do not count   */
    int  n_stages;         /* (the last one takes what does not fit)                        */
    struct het_calibrate_stage stages[HET_CALIBRATE_MAX_STAGES];
};

/* Calibrate dev into a new profile. Emulated devices are refused
 * (HET_ERR_UNSUPPORTED): their timings would be the host's, not the device's.
 * Robust against other work on the machine: repetitions that were delayed
 * are dropped and re-run, a measurement with too few undisturbed
 * repetitions or off the trend of its neighbours in a sweep (a norm over 16
 * rows taking 1000x one over 4) is measured again, and what stays noisy is
 * counted: past a tenth of the samples (or a third of one model's), the
 * profile is marked noisy (het_profile_noisy) and the cache refuses it. */
het_profile    *het_calibrate_device(het_device *dev, const struct het_calibrate_params *params, het_error *err);
/* Measure the hand-off from `from` to `to` and record it in `from_profile`. */
enum het_status het_calibrate_handoff(het_device *from, het_device *to, het_profile *from_profile,
                                      const struct het_calibrate_params *params, het_error *err);

/* ---------------------------------------------------------------------------
 * Refused calibrations (policy/refusal.c). A calibration the cache refused
 * (noisy: the machine was busy) is remembered beside the profile it would
 * have been (<name>-<hash>.refused in the profile cache folder, keyed by the
 * device identity and het version, and inside by what was to be measured),
 * with how many times in a row. First-use calibrations of the same needs
 * then back off: none before het_calibrate_backoff_s(count) has passed since
 * the last refusal. A calibration that is stored clears the record.       */

struct het_calibrate_refusal {
    uint64_t needs_key;        /* het_calibrate_needs_key of what was to be measured */
    int      count;            /* refusals in a row (>= 1)                          */
    int64_t  first_s, last_s;  /* the first and the latest, unix seconds            */
    int64_t  retry_s;          /* no first-use calibration before, unix seconds     */
    char     why[256];         /* the latest refusal's reason                       */
};

/* Seconds to wait after the count-th refusal in a row: 10 min, doubling per
 * refusal, at most 24 h (HET_CALIBRATE_BACKOFF_MAX_S). */
#define HET_CALIBRATE_BACKOFF_FIRST_S 600
#define HET_CALIBRATE_BACKOFF_MAX_S   86400
int64_t         het_calibrate_backoff_s(int count);
/* A key of what a calibration measures (needs NULL: the generic set). */
uint64_t        het_calibrate_needs_key(const struct het_calibrate_needs *needs);
/* Parse a record (a cache file's text: untrusted). HET_ERR_INVALID naming
 * the line and field at fault. */
enum het_status het_calibrate_refusal_parse(const char *text, size_t len, struct het_calibrate_refusal *out,
                                            het_error *err);
/* The record's text (what het_calibrate_refusal_parse reads) into buf. */
enum het_status het_calibrate_refusal_format(const struct het_calibrate_refusal *r, char *buf, size_t size,
                                             het_error *err);
/* dev's record into *out, *found false when there is none. A file that
 * cannot be read or parsed: HET_ERR_INVALID or HET_ERR_IO naming it (the
 * caller treats it as no record; the next refusal or success replaces it). */
enum het_status het_calibrate_refusal_load(const het_device *dev, struct het_calibrate_refusal *out, bool *found,
                                           het_error *err);
/* Record a refusal of dev's calibration of needs_key at now_s: the count goes
 * on from a record of the same needs, else starts at 1. *out (optional)
 * receives the record stored. */
enum het_status het_calibrate_refusal_record(const het_device *dev, uint64_t needs_key, const char *why, int64_t now_s,
                                             struct het_calibrate_refusal *out, het_error *err);
/* Forget dev's record (none is fine). */
enum het_status het_calibrate_refusal_clear(const het_device *dev, het_error *err);

/* ---------------------------------------------------------------------------
 * Acquisition (policy/acquire.c): a profile for every device of a set, as a
 * session gets them.                                                       */

struct het_profiles_params {
    const char *files;           /* "FILE[,FILE]": profiles to use by device name;
                                    "default": the unmeasured defaults; NULL: none  */
    bool        recalibrate;     /* ignore cached profiles                          */
    bool        no_calibration;  /* never calibrate: unmeasured defaults instead    */
    /* (optional) what the model at hand needs: a first-use calibration
     * measures only that, and a cached profile lacking part of it is
     * extended (het_profile_covers) */
    const struct het_calibrate_needs *needs;
    bool        accept_noisy;    /* cache a calibration that stayed noisy anyway    */
    bool        test_disturbed;  /* (testing) het_calibrate_params.test_disturbed   */
    /* (optional) one line per notice (a calibration starting, a hand-off being
     * measured, a profile that could not be stored) */
    void      (*log)(void *user, const char *line);
    void      (*progress)(void *user, double fraction, const char *what);
    void       *user;
};

/* One profile per device into out[n] (owned by the caller), in this order: a
 * --profile file entry with the device's name; the NPU's cost model; the
 * cache (unless recalibrate) when it covers needs; the cached or unmeasured
 * default profile when files is "default" or no_calibration; the same while
 * a refused calibration of these needs backs off (het_calibrate_refusal:
 * labelled refused, with a notice; recalibrate tries anyway); else a quick
 * calibration now of what needs asks (extending the cached profile), stored
 * in the cache unless it stayed noisy (then used as it is, the refusal
 * recorded, with a notice; when it fails: the cached or unmeasured default,
 * with a notice). Hand-offs between measured devices are measured when
 * missing or when either side is new (not with files), and stored. */
enum het_status het_profiles_acquire(het_device *const *devs, int n, const struct het_profiles_params *p,
                                     het_profile **out, het_error *err);
/* The profiles in p->files that match none of devs (devices to simulate)
 * into out[max]; *n_out receives the count. */
enum het_status het_profiles_extra(const struct het_profiles_params *p, het_device *const *devs, int n,
                                   het_profile **out, int max, int *n_out, het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_PROFILE_H */
