/*
 * options.c — hetrun's flag parser: one table of every flag, each command
 * naming the subset it accepts, so an unknown or misplaced flag is one clear
 * error line instead of being ignored.
 */
#include "tools/hetrun.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum kind { K_STR, K_INT, K_FLOAT, K_U64, K_BOOL, K_OPTSTR, K_INTLIST };

struct flag {
    const char *name;   /* "-m" or "--temp"; aliases separated by '|' */
    enum kind   kind;
    size_t      off;
    double      lo, hi; /* numeric range */
    const char *help;
};

#define F(field) offsetof(struct hr_opts, field)
static const struct flag flags[] = {
    { "-m|--model",     K_STR,   F(model),       0, 0,   "GGUF model file (default: the bundled stories260K)" },
    { "-p|--prompt",    K_STR,   F(prompt),      0, 0,   "prompt text" },
    { "-f|--file",      K_STR,   F(prompt_file), 0, 0,   "read the prompt from a file" },
    { "-o|--output",    K_STR,   F(out),         0, 0,   "output file" },
    { "-n|--n-predict", K_INTLIST, F(tg_list),   0, 1e7, "tokens to generate (bench: decode tokens; N,N,... runs each)" },
    { "--temp",         K_FLOAT, F(temp),        0, 100, "sampling temperature, 0 = greedy" },
    { "--top-k",        K_INT,   F(top_k),       0, 1e7, "top-k sampling, 0 = off" },
    { "--top-p",        K_FLOAT, F(top_p),       0, 1,   "top-p sampling, 1 = off" },
    { "--seed",         K_U64,   F(seed),        0, 0,   "sampling seed" },
    { "-t|--threads",   K_INT,   F(threads),     1, 1024, "CPU threads (default: physical cores)" },
    { "-c|--ctx",       K_INT,   F(n_ctx),       1, 1 << 24, "context length in tokens" },
    { "--device",       K_STR,   F(device),      0, 0,   "run everything on one device: cpu, vulkan, vulkan:N" },
    { "--devices",      K_STR,   F(devices),     0, 0,   "device set, in priority order: cpu,vulkan,npu, or auto (every usable device; the default, or $HET_DEVICES)" },
    { "--policy",       K_STR,   F(policy),      0, 0,   "placement: fastest (measured plan, default) | first | single:DEV | alternate" },
    { "--npu",          K_STR,   F(npu),         0, 0,   "NPU mode for the 'npu' device: hardware | emulate (default: $HET_NPU, else hardware)" },
    { "--strict",       K_BOOL,  F(strict),      0, 0,   "a fallback (op run off its planned device) is an error" },
    { "--f32-activations", K_BOOL, F(f32_act),   0, 0,   "CPU matmuls keep activations in F32 (weights dequantised): the F32 weights'"
                                                         " logits, runs 3-4x slower; default: 8-bit activations as llama.cpp" },
    { "--no-bos",       K_BOOL,  F(no_bos),      0, 0,   "do not add the BOS token" },
    { "--json",         K_BOOL,  F(json),        0, 0,   "print one JSON object" },
    { "--stats",        K_OPTSTR, F(stats),      0, 0,   "print memory and device statistics (--stats=json: one JSON line on stderr)" },
    { "-v|--verbose",   K_BOOL,  F(verbose),     0, 0,   "log decisions and fallbacks" },
    { "-r|--repetitions", K_INT, F(reps),        1, 1000, "bench repetitions" },
    { "--load",         K_INT,   F(load),        1, 1024, "bench: also measure beside N busy-loop processes (each repetition: quiet, then loaded)" },
    { "-d|--depth",     K_INTLIST, F(depth_list), 0, 1 << 24, "bench: tokens in the cache before each pp and tg run (evaluated first, not timed), as llama-bench -d; N,N,... runs each" },
    { "--system",       K_STR,   F(system),      0, 0,   "chat: the system prompt" },
    { "--gpu-times",    K_BOOL,  F(gpu_times),   0, 0,   "print per-op and per-node Vulkan GPU times on stderr at the end" },
    { "--arch",         K_STR,   F(arch),        0, 0,   "mkmodel: llama | qwen2 | qwen3" },
    { "--preset",       K_STR,   F(preset),      0, 0,   "mkmodel: a named shape (qwen3-0.6b, tiny, ...)" },
    { "--vocab",        K_STR,   F(vocab),       0, 0,   "mkmodel: GGUF to take the tokenizer from" },
    { "--type",         K_STR,   F(wtype),       0, 0,   "mkmodel: weight type of the layers (f32, f16, q8_0, q4_0, q4_k, q6_k, ...)" },
    { "--output-type",  K_STR,   F(otype),       0, 0,   "mkmodel: type of token_embd/output" },
    { "--n-layer",      K_INT,   F(n_layer),     1, 4096, "mkmodel: layers" },
    { "--n-embd",       K_INT,   F(n_embd),      1, 1 << 20, "mkmodel: embedding width" },
    { "--n-head",       K_INT,   F(n_head),      1, 4096, "mkmodel: attention heads" },
    { "--n-head-kv",    K_INT,   F(n_head_kv),   1, 4096, "mkmodel: KV heads" },
    { "--head-dim",     K_INT,   F(head_dim),    1, 1024, "mkmodel: head dimension" },
    { "--n-ff",         K_INT,   F(n_ff),        1, 1 << 22, "mkmodel: feed-forward width" },
    { "--tied",         K_BOOL,  F(tied),        0, 0,   "mkmodel: tie output to token_embd" },
    { "--host",         K_STR,   F(host),        0, 0,   "serve: address to listen on (default 127.0.0.1, loopback)" },
    { "--port",         K_INT,   F(port),        0, 65535, "serve: TCP port (default 8080; 0: any free port)" },
    { "--parallel",     K_INT,   F(parallel),    1, 1024, "serve: sequences batched together (default 4)" },
    { "--queue",        K_INT,   F(queue),       1, 1 << 20, "serve: requests that may wait for a slot; more get 503 (default 64)" },
    { "--max-conns",    K_INT,   F(max_conns),   1, 65536, "serve: open connections; more get 503 (default 64)" },
    { "--batch",        K_INT,   F(batch),       1, 1 << 20, "serve: prompt tokens per batch step (default 512); plan: prefill tokens (default 128)" },
    { "--long-model",   K_STR,   F(long_model),  0, 0,   "model for long prompts (routing by prompt length)" },
    { "--long-threshold", K_INT, F(long_threshold), 1, 1 << 24, "prompt tokens from which --long-model serves (default: derived from a start-up calibration)" },
    { "--long-devices", K_STR,   F(long_devices), 0, 0,  "device set of --long-model (default: as --device/--devices)" },
    { "--long-ctx",     K_INT,   F(long_ctx),    1, 1 << 24, "context length of --long-model (default: min(its train ctx, 4096))" },
    { "--long-parallel", K_INT,  F(long_parallel), 1, 1024, "serve: sequences of the long route (default: --parallel)" },
    { "--api-key",      K_STR,   F(api_key),     0, 0,   "serve: KEY every endpoint but /health wants as 'Authorization: Bearer KEY' (default: $HET_API_KEY; none)" },
    { "--repeat-penalty", K_FLOAT, F(repeat_penalty), 0, 10, "divide the logits of tokens seen in the last --repeat-last-n by this (default 1 = off)" },
    { "--repeat-last-n", K_INT,  F(repeat_last_n), -1, 1 << 20, "tokens the penalties look back over (default 64; 0: penalties off; -1: all)" },
    { "--presence-penalty", K_FLOAT, F(presence_penalty), -2, 2, "subtract from the logit of each token seen (default 0 = off)" },
    { "--frequency-penalty", K_FLOAT, F(frequency_penalty), -2, 2, "subtract this times its count from each seen token's logit (default 0 = off)" },
    { "--min-p",        K_FLOAT, F(min_p),       0, 1,   "drop tokens less likely than this times the most likely one (default 0 = off)" },
    { "--logit-bias",   K_STR,   F(logit_bias),  0, 0,   "TOKEN=BIAS[,...]: add BIAS (-100..100) to token id TOKEN's logit" },
    /* planning and calibration (struct hr_plan_opts); plan's --batch is the one above */
    { "--phase",        K_STR,   F(plan.phase),  0, 0,   "plan: prefill | decode (default decode)" },
    { "--past",         K_INT,   F(plan.past),   0, 1 << 20, "plan: decode: tokens already in the cache (default 128)" },
    { "--measure",      K_BOOL,  F(plan.measure), 0, 0,  "plan: run the plan and add measured us per node and in total" },
    { "--profile",      K_STR,   F(plan.profile), 0, 0,  "profile file(s) or a what-if machine (ryzen-ai-7040), comma-separated; devices not present are simulated;"
                                                         " 'default': unmeasured defaults, no calibration (also HET_CALIBRATE=0)" },
    { "--pin",          K_STR,   F(plan.pin),    0, 0,   "PATTERN=DEVICE[,...]: glob on node or op name" },
    { "--overlap",      K_BOOL,  F(plan.overlap), 0, 0,  "overlap independent splits on different devices" },
    { "--quick",        K_BOOL,  F(plan.quick),  0, 0,   "calibrate: quick calibration (seconds)" },
    { "--recalibrate",  K_BOOL,  F(plan.recalibrate), 0, 0, "measure again even if a profile is cached" },
    { "--ops",          K_BOOL,  F(plan.ops),    0, 0,   "per op class: achieved GB/s and GFLOP/s beside the roofline" },
    { "--plot",         K_STR,   F(plan.plot),   0, 0,   "write measured-vs-model PNG curves into this folder (gnuplot)" },
    { "--types",        K_STR,   F(plan.types),  0, 0,   "calibrate: matmul weight types, e.g. q4_0,q8_0,f16, or all (default: f32,f16,q8_0,q4_0,q4_K,q6_K)" },
    { "--accept-noisy", K_BOOL,  F(plan.accept_noisy), 0, 0, "calibrate: cache the profile even when its samples stayed noisy (busy machine)" },
    { "--accuracy",     K_BOOL,  F(plan.accuracy), 0, 0, "plan: evaluate a text (-p/-f, default a built-in one) on the CPU alone and"
                                                         " with the plan: per-position top-1 agreement, KL(p_cpu || p_plan)" },
    { "--accuracy-budget", K_STR, F(plan.accuracy_budget), 0, 0, "KL: keep lossy devices (the NPU: int8 activations) to node groups whose"
                                                         " predicted mean KL per position (nats) stays under KL; 0: no lossy device" },
    { "--sensitivity",  K_STR,   F(plan.sensitivity), 0, 0, "FILE | measure | estimate: KL per node group for --accuracy-budget (default:"
                                                         " the cached measurement, else measured now and cached)" },
};
#undef F

/* What --help shows beside each flag: its value placeholder and its default
 * (by the flag's first name; a flag missing here shows a placeholder from
 * its kind and no default). */
static const struct flag_doc {
    const char *name, *meta, *def;
} flag_docs[] = {
    { "-m",               "FILE",     "the bundled stories260K.gguf" },
    { "-p",               "TEXT",     "\"Once upon a time\"" },
    { "-f",               "FILE",     NULL },
    { "-o",               "FILE",     NULL },
    { "-n",               "N",        "run 128, chat 512 per reply, bench 128; serve: 256 per request" },
    { "--temp",           "X",        "0.8" },
    { "--top-k",          "N",        "40" },
    { "--top-p",          "X",        "0.95" },
    { "--seed",           "N",        "42" },
    { "-t",               "N",        "the physical cores" },
    { "-c",               "N",        "min(the model's training context, 4096)" },
    { "--device",         "DEV",      NULL },
    { "--devices",        "LIST",     "auto" },
    { "--policy",         "NAME",     "fastest" },
    { "--npu",            "MODE",     "$HET_NPU, else hardware" },
    { "--stats",          "[=json]",  NULL },
    { "-r",               "N",        "3" },
    { "-d",               "N",        "0" },
    { "--system",         "TEXT",     "none" },
    { "--arch",           "NAME",     "the preset's" },
    { "--preset",         "NAME",     NULL },
    { "--vocab",          "FILE",     NULL },
    { "--type",           "TYPE",     "the preset's" },
    { "--output-type",    "TYPE",     "the preset's" },
    { "--n-layer",        "N",        "the preset's" },
    { "--n-embd",         "N",        "the preset's" },
    { "--n-head",         "N",        "the preset's" },
    { "--n-head-kv",      "N",        "the preset's" },
    { "--head-dim",       "N",        "the preset's" },
    { "--n-ff",           "N",        "the preset's" },
    { "--host",           "ADDR",     "127.0.0.1" },
    { "--port",           "N",        "8080" },
    { "--parallel",       "N",        "4" },
    { "--queue",          "N",        "64" },
    { "--max-conns",      "N",        "64" },
    { "--batch",          "N",        "serve 512, plan 128" },
    { "--long-model",     "FILE",     NULL },
    { "--long-threshold", "N",        NULL },
    { "--long-devices",   "LIST",     NULL },
    { "--long-ctx",       "N",        NULL },
    { "--long-parallel",  "N",        NULL },
    { "--phase",          "NAME",     NULL },
    { "--past",           "N",        NULL },
    { "--profile",        "FILE[,FILE]", "the cached profile, else a quick calibration" },
    { "--pin",            "PATTERN=DEV[,...]", "none" },
    { "--plot",           "DIR",      NULL },
    { "--types",          "LIST",     "a default set" },
    { "--accuracy-budget", "KL",      "none" },
    { "--sensitivity",    "SOURCE",   NULL },
};

static const struct flag_doc *flag_doc(const struct flag *f)
{
    size_t n = strcspn(f->name, "|");
    for (size_t i = 0; i < sizeof flag_docs / sizeof flag_docs[0]; i++)
        if (strlen(flag_docs[i].name) == n && !strncmp(flag_docs[i].name, f->name, n)) return &flag_docs[i];
    return NULL;
}

static bool name_matches(const char *spec, const char *arg, size_t arglen)
{
    const char *p = spec;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == arglen && !strncmp(p, arg, n)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static bool allowed_flag(const char *allowed, const struct flag *f)
{
    /* allowed lists long or short names; a flag is allowed if any alias is listed */
    const char *p = allowed;
    while (*p) {
        while (*p == ' ') p++;
        const char *e = p;
        while (*e && *e != ' ') e++;
        if (e > p && name_matches(f->name, p, (size_t)(e - p))) return true;
        p = e;
    }
    return false;
}

void hr_error(const struct hr_opts *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hetrun %s: ", o && o->cmd ? o->cmd : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void print_help(const char *cmd, const char *allowed)
{
    static const char *const kind_meta[] = { [K_STR] = "TEXT", [K_INT] = "N", [K_FLOAT] = "X", [K_U64] = "N",
                                             [K_BOOL] = NULL, [K_OPTSTR] = "[=TEXT]",
                                             [K_INTLIST] = "N[,N...]" };
    printf("usage: hetrun %s [options]\n", cmd);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        const struct flag *f = &flags[i];
        if (!allowed_flag(allowed, f)) continue;
        if (!strcmp(cmd, "bench") && f->off == offsetof(struct hr_opts, prompt)) { /* bench reads -p as a count (hr_parse) */
            printf("  %-28s %s\n", "-p, --prompt N", "prompt tokens of each pp run, 0: no pp run; N,N,... runs each (default: 512)");
            continue;
        }
        const struct flag_doc *d = flag_doc(f);
        const char *meta = d && d->meta ? d->meta : kind_meta[f->kind];
        char names[64], left[96];
        size_t k = 0;
        for (const char *c = f->name; *c && k + 3 < sizeof names; c++) {
            if (*c == '|') { names[k++] = ','; names[k++] = ' '; }
            else names[k++] = *c;
        }
        names[k] = 0;
        snprintf(left, sizeof left, "%s%s%s", names, meta && meta[0] != '[' ? " " : "", meta ? meta : "");
        printf("  %-28s %s", left, f->help);
        if (d && d->def && !strstr(f->help, "default")) printf(" (default: %s)", d->def);
        putchar('\n');
    }
}

/* "N" or "N,N,..." (at most HR_LIST_MAX values, each in [lo, hi]); what
 * names one value in the error line (NULL: "an integer in [lo, hi]") */
static bool parse_intlist(struct hr_opts *o, const char *flagname, const char *v, double lo, double hi,
                          const char *what, struct hr_intlist *l)
{
    l->n = 0;
    const char *p = v;
    for (;;) {
        char *end;
        errno = 0;
        const long x = strtol(p, &end, 10);
        if (errno || end == p || (*end && *end != ',') || x < lo || x > hi || l->n == HR_LIST_MAX) {
            char range[64];
            snprintf(range, sizeof range, "an integer in [%.0f, %.0f]", lo, hi);
            hr_error(o, "%s: '%s' is not %s, or a list of at most %d of them (N,N,...)", flagname, v,
                     what ? what : range, HR_LIST_MAX);
            return false;
        }
        l->v[l->n++] = (int)x;
        if (!*end) return true;
        p = end + 1;
    }
}

static bool set_value(struct hr_opts *o, const struct flag *f, const char *flagname, const char *v)
{
    char *end;
    void *dst = (char *)o + f->off;
    errno = 0;
    switch (f->kind) {
    case K_STR:
    case K_OPTSTR:
        *(const char **)dst = v;
        return true;
    case K_INT: {
        long x = strtol(v, &end, 10);
        if (errno || *end || end == v || x < f->lo || x > f->hi) {
            hr_error(o, "%s: '%s' is not an integer in [%.0f, %.0f]", flagname, v, f->lo, f->hi);
            return false;
        }
        *(int *)dst = (int)x;
        return true;
    }
    case K_FLOAT: {
        double x = strtod(v, &end);
        if (errno || *end || end == v || !isfinite(x) || x < f->lo || x > f->hi) {
            hr_error(o, "%s: '%s' is not a number in [%g, %g]", flagname, v, f->lo, f->hi);
            return false;
        }
        *(float *)dst = (float)x;
        return true;
    }
    case K_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || end == v || v[0] == '-') {
            hr_error(o, "%s: '%s' is not a non-negative integer", flagname, v);
            return false;
        }
        *(uint64_t *)dst = x;
        return true;
    }
    case K_BOOL:
        *(bool *)dst = true;
        return true;
    case K_INTLIST:
        return parse_intlist(o, flagname, v, f->lo, f->hi, NULL, dst);
    }
    return false;
}

/* --accuracy-budget KL (a number >= 0) and --sensitivity (FILE, measure, estimate; a file is read later) */
static bool parse_accuracy(struct hr_opts *o)
{
    struct hr_plan_opts *po = &o->plan;
    po->budget_kl = NAN;
    if (po->accuracy_budget) {
        char *end;
        po->budget_kl = strtod(po->accuracy_budget, &end);
        if (*end || end == po->accuracy_budget || !(po->budget_kl >= 0) || !isfinite(po->budget_kl)) {
            hr_error(o, "--accuracy-budget: '%s' is not a KL >= 0 (mean nats per position, e.g. 1e-3)",
                     po->accuracy_budget);
            return false;
        }
    }
    if (po->sensitivity && !*po->sensitivity) {
        hr_error(o, "--sensitivity: empty (expected FILE, measure or estimate)");
        return false;
    }
    return true;
}

bool hr_parse(struct hr_opts *o, const char *cmd, const char *allowed, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    o->n_predict = -1;
    o->temp = 0.8f;
    o->top_k = 40;
    o->top_p = 0.95f;
    o->seed = 42;
    o->pp = 512;
    o->tg = 128;
    o->reps = 3;
    o->plan.past = 128;
    o->port = 8080;
    o->repeat_penalty = 1.0f;
    o->repeat_last_n = 64;
    o->argv_rest = argv + argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(cmd, allowed);
            exit(0);
        }
        if (a[0] != '-' || !a[1]) {
            hr_error(o, "unexpected argument '%s' (see hetrun %s --help)", a, cmd);
            return false;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
        const struct flag *f = NULL;
        for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
            if (name_matches(flags[k].name, a, len)) f = &flags[k];
        if (!f || !allowed_flag(allowed, f)) {
            hr_error(o, "unknown flag '%.*s' (see hetrun %s --help)", (int)len, a, cmd);
            return false;
        }
        const char *v = NULL;
        if (f->kind == K_BOOL) {
            if (eq && a[1] == '-') {
                hr_error(o, "%.*s takes no value", (int)len, a);
                return false;
            }
        } else if (f->kind == K_OPTSTR) {
            v = eq && a[1] == '-' ? eq + 1 : "text";
        } else if (eq && a[1] == '-') {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            hr_error(o, "%s needs a value", a);
            return false;
        }
        char fname[64];
        snprintf(fname, sizeof fname, "%.*s", (int)len, a);
        if (!set_value(o, f, fname, v)) return false;
    }
    /* lists of -n and -d are bench's sweeps; elsewhere one value */
    const bool bench = !strcmp(cmd, "bench");
    if (o->tg_list.n > 1 && !bench) {
        hr_error(o, "-n: several values (N,N,...) are for bench only");
        return false;
    }
    if (o->tg_list.n) o->n_predict = o->tg_list.v[0];
    if (o->depth_list.n) o->depth = o->depth_list.v[0];
    /* bench reuses -p/-n as counts */
    if (bench) {
        if (o->prompt) {
            if (!parse_intlist(o, "-p", o->prompt, 0, 1 << 20, "a prompt length in tokens (0: no pp run)",
                               &o->pp_list))
                return false;
            o->pp = o->pp_list.v[0];
        }
        if (o->n_predict >= 0) o->tg = o->n_predict;
        if (!o->pp_list.n) o->pp_list = (struct hr_intlist){ 1, { o->pp } };
        if (!o->tg_list.n) o->tg_list = (struct hr_intlist){ 1, { o->tg } };
        if (!o->depth_list.n) o->depth_list = (struct hr_intlist){ 1, { o->depth } };
        if (hr_intlist_max(&o->pp_list) <= 0 && hr_intlist_max(&o->tg_list) <= 0) {
            hr_error(o, "-p 0 and -n 0: no pp and no tg run to measure");
            return false;
        }
    }
    /* --batch: plan's prefill tokens (default 128), serve's tokens per step (its own default) */
    o->plan.batch = o->batch ? o->batch : 128;
    if (o->plan.phase && strcmp(o->plan.phase, "prefill") && strcmp(o->plan.phase, "decode")) {
        hr_error(o, "--phase: '%s' (expected prefill or decode)", o->plan.phase);
        return false;
    }
    if (!parse_accuracy(o)) return false;
    if (o->device && o->devices) {
        hr_error(o, "--device and --devices are exclusive");
        return false;
    }
    if (!o->model) o->model = hr_default_model();
    return true;
}

const char *hr_default_model(void)
{
    static char buf[4096];
    const char *env = getenv("HET_MODEL");
    if (env && *env) return env;
    struct stat st;
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 64);
    if (n > 0) {
        buf[n] = 0;
        char *slash = strrchr(buf, '/');
        const char *rel[] = { "/../models/stories260K.gguf", "/../share/het/stories260K.gguf" };
        for (int i = 0; slash && i < 2; i++) {
            snprintf(slash, sizeof buf - (size_t)(slash - buf), "%s", rel[i]);
            if (stat(buf, &st) == 0) return buf;
        }
    }
    return HET_DEFAULT_MODEL;
}

void hr_json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') printf("\\%c", ch);
        else if (ch < 0x20) printf("\\u%04x", ch);
        else putchar(ch);
    }
    putchar('"');
}

void hr_json_num(double v, const char *fmt)
{
    if (isfinite(v)) printf(fmt, v);
    else printf("null");
}

double hr_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
