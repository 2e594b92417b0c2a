/*
 * hetrun.h — what the hetrun subcommands share: parsed options, device-set
 * construction from the placement flags, model + context set-up, and small
 * output helpers. Each subcommand lives in its own cmd_<name>.c.
 */
#ifndef HETRUN_H
#define HETRUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "het/device.h"
#include "het/model.h"
#include "het/npu.h"
#include "het/plan.h"
#include "het/pool.h"
#include "het/profile.h"
#include "het/sched.h"
#include "het/session.h"
#include "tools/hr_profile.h"

/* A flag's comma-separated integers (bench -p, -n, -d sweep them). */
#define HR_LIST_MAX 16
struct hr_intlist {
    int n;
    int v[HR_LIST_MAX];
};
static inline int hr_intlist_max(const struct hr_intlist *l)
{
    int m = 0;
    for (int i = 0; i < l->n; i++) m = l->v[i] > m ? l->v[i] : m;
    return m;
}

struct hr_opts {
    const char *cmd;
    const char *model;        /* -m                                       */
    const char *prompt;       /* -p                                       */
    const char *prompt_file;  /* -f                                       */
    const char *out;          /* -o                                       */
    int         n_predict;    /* -n: tokens to generate (default 128)     */
    float       temp;         /* --temp (default 0.8; 0 = greedy)         */
    int         top_k;        /* --top-k (default 40)                     */
    float       top_p;        /* --top-p (default 0.95)                   */
    uint64_t    seed;         /* --seed (default 42)                      */
    int         threads;      /* -t (default: physical cores)             */
    int         n_ctx;        /* -c (default: min(train ctx, 4096))       */
    const char *device;       /* --device D                               */
    const char *devices;      /* --devices a,b,c                          */
    const char *policy;       /* --policy first|single:D|alternate        */
    const char *npu;          /* --npu emulate|hardware|off (or HET_NPU)  */
    bool        strict;       /* --strict: fallbacks are errors           */
    bool        f32_act;      /* --f32-activations: exact CPU matmuls     */
    bool        no_bos;       /* --no-bos                                 */
    bool        json;         /* --json                                   */
    const char *stats;        /* --stats[=json]                           */
    bool        verbose;      /* -v                                       */
    int         pp;           /* bench -p (default 512)                   */
    int         tg;           /* bench -n (default 128)                   */
    int         reps;         /* bench -r (default 3)                     */
    int         load;         /* bench --load N: busy loops beside (0: none) */
    int         depth;        /* bench -d: tokens in the cache before each run */
    /* bench sweeps: every value of -p, -n and -d (one each unless a list
     * was given; pp, tg and depth hold the first) */
    struct hr_intlist pp_list, tg_list, depth_list;
    /* mkmodel */
    const char *arch, *preset, *vocab, *wtype, *otype;
    int         n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    bool        tied;
    /* serve, and run's --long-model routing */
    const char *host;         /* serve --host (default 127.0.0.1)        */
    int         port;         /* serve --port (default 8080; 0: any)     */
    int         parallel;     /* serve --parallel (default 4)            */
    int         queue;        /* serve --queue (default 64)              */
    int         max_conns;    /* serve --max-conns (default 64)          */
    int         batch;        /* serve --batch (default 512)             */
    const char *long_model;   /* --long-model                            */
    int         long_threshold; /* --long-threshold (0: derived)        */
    const char *long_devices; /* --long-devices (default: as --devices)  */
    int         long_ctx;     /* --long-ctx                              */
    int         long_parallel;/* serve --long-parallel (default --parallel) */
    const char *api_key;      /* serve --api-key (default $HET_API_KEY)  */
    /* run: repetition penalties, min-p and logit bias (het_sampler_params) */
    float       repeat_penalty, presence_penalty, frequency_penalty, min_p;
    int         repeat_last_n;          /* default 64; 0: penalties off; -1: all */
    const char *logit_bias;             /* --logit-bias "TOKEN=BIAS[,TOKEN=BIAS...]" */
    struct hr_plan_opts plan; /* --profile --pin --recalibrate --overlap (--ops) */
    bool        gpu_times;    /* --gpu-times: per-node Vulkan GPU time (gpu_times.c) */
    const char *system;       /* chat --system: the system prompt        */
    int         argc_rest;    /* positional arguments left               */
    char      **argv_rest;
};

/* serve's --parallel when not given */
#define HR_SERVE_PARALLEL 4

/* The placement flags every command that runs a model takes (run, logits,
 * bench, plan, serve). */
#define HR_PLACEMENT_FLAGS "--device --devices --policy --npu --strict --profile --pin --recalibrate --overlap " \
                           "--accuracy-budget --sensitivity --f32-activations"

/* Parse argv for cmd; allowed is a space-separated list of flags the command
 * takes. Prints one error line and returns false on a bad flag or value. */
bool hr_parse(struct hr_opts *o, const char *cmd, const char *allowed, int argc, char **argv);
/* The bundled default model path (HET_MODEL env, then next to the binary, then the source tree). */
const char *hr_default_model(void);

/* A ready-to-run model: the library's session (het/session.h) opened from
 * the flags, with its parts at hand and the log lines it printed. */
struct hr_session {
    het_session *hs;
    het_pool    *pool;         /* every tensor of the run; NULL with HET_POOL=off */
    het_device  *devices[4];
    int          n_devices;
    het_sched   *sched;
    het_model   *model;
    het_context *ctx;
    uint32_t     seen[64];     /* hashes of log lines already shown           */
    int          n_seen;
    uint64_t     fallback_lines;
    struct hr_progress cal_progress; /* of a first-use calibration            */
};
/* Open the session the flags describe; prints one error line on failure.
 * need_ctx: open a context (n_ctx tokens, serve: --parallel sequences). */
bool hr_session_open(struct hr_session *s, const struct hr_opts *o, bool need_ctx);
void hr_session_close(struct hr_session *s);
/* The session parameters the flags (and HET_POOL, HET_POOL_MB,
 * HET_CALIBRATE, HET_NPU) describe; false after one error line. */
bool hr_session_params(const struct hr_opts *o, struct het_session_params *p);
/* One device from a spec ("cpu", "vulkan:N", "npu:MODE") with the flags'
 * threads and NPU mode; npu_default: the NPU's mode when nothing names one. */
het_device *hr_open_device(const struct hr_opts *o, const char *spec, const char *npu_default, het_error *err);
/* --device, else --devices, else $HET_DEVICES, else "auto". */
const char *hr_device_list(const struct hr_opts *o);
/* A device set from a list of specs where "auto" is every usable device
 * (het_devices_open); cands (optional) receives what auto considered. */
enum het_status hr_open_devices(const struct hr_opts *o, const char *list, const char *npu_default, het_device **out,
                                int max, int *n, struct het_device_candidate *cands, int *n_cands, het_error *err);
/* The prompt's bytes: -p, or the contents of -f (then *owned is the buffer
 * to free). NULL, after one error line, when the file cannot be read. */
const char *hr_prompt_text(const struct hr_opts *o, size_t *len, char **owned);
/* Tokenize the prompt (-p or -f), adding BOS as the model says unless --no-bos. */
bool hr_tokenize_prompt(const struct hr_session *s, const struct hr_opts *o, int32_t **ids, int32_t *n);
void hr_print_stats(const struct hr_session *s, const struct hr_opts *o);

/* hr_budget.c: --stats for --accuracy-budget: one line; json: an
 * "accuracy_budget":{...} member and a comma */
void hr_budget_print_stats(const struct hr_session *s, const struct hr_opts *o, FILE *f, bool json);

/* hr_pool.c: HET_POOL (backing order or "off") and HET_POOL_MB (size) onto
 * the session parameters; false after one error line. */
bool   hr_pool_params(const struct hr_opts *o, struct het_session_params *p);
/* --stats lines: the pool's description and counters */
void   hr_pool_print_stats(const struct hr_session *s, FILE *f);
/* --stats=json members (each followed by a comma): pool_backing, sizes */
void   hr_pool_print_json(const struct hr_session *s, FILE *f);
/* --long-model: the options that open the long route (model, devices, ctx) */
void hr_long_opts(const struct hr_opts *o, struct hr_opts *lo);
/* run --long-model: pick the route for the tokenized prompt; when it is the
 * long one, *s becomes the long model's session and the prompt is
 * re-tokenized with its tokenizer. Prints the decision on stderr. */
bool hr_route_session(struct hr_session *s, const struct hr_opts *o, int32_t **ids, int32_t *n_ids);

double hr_now_ms(void);
/* JSON on stdout: s as a string literal (quotes, backslashes and control
 * characters escaped); v with printf format fmt, or null when not finite. */
void hr_json_str(const char *s);
void hr_json_num(double v, const char *fmt);
/* fprintf(stderr, "hetrun <cmd>: ...\n") */
void hr_error(const struct hr_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_run(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_devices(int argc, char **argv);
/* plan and calibrate live in cmd_plan.c / cmd_calibrate.c (see hr_profile.h) */
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);

#endif /* HETRUN_H */
