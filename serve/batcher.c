/*
 * batcher.c — continuous batching for one route (see batcher.h).
 *
 * Prefix reuse: a slot keeps its sequence's KV cache when its job ends, with
 * the list of tokens it holds. A new job goes to the free slot whose tokens
 * share the longest prefix with its prompt, and only the rest of the prompt
 * is evaluated; so a conversation's next turn (its prompt = the last prompt
 * + the reply + more) mostly skips its prefill when it comes back to the
 * same server (docs/serve.md: session affinity behind a load balancer).
 *
 * Locking: b->mu guards the queue, the slot table and every job field a
 * reader can see (text, finish, counters, cancelled, refs). The engine
 * thread drops the lock while it evaluates and samples; the context, the
 * samplers, the slots' token lists and each job's prompt position (n_fed,
 * last_tok) are touched by that thread only. A job is freed when its last reference goes: the
 * reader's (het_job_release) and the engine's (when it leaves its slot or
 * the queue).
 */
#include "serve/batcher.h"

#include "sched/clock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/utf8.h"

#define SAMPLE_HELPERS_MAX    7     /* threads besides the engine's that sample a step's parts */
#define SAMPLE_PARALLEL_VOCAB 16384 /* below, a draw costs less than starting a thread */

struct het_job {
    /* fixed at submit */
    int32_t     *prompt;
    int32_t      n_prompt, max_tokens;
    char       **stop;
    int          n_stop;
    bool         ignore_eos;
    int          logprobs;     /* -1: none; else alternatives per token */
    het_sampler *smp;
    uint64_t     order;
    /* engine thread only */
    int32_t      n_fed;        /* prompt tokens evaluated (or reused) */
    int32_t      n_cached;     /* prompt tokens reused from the slot's cache */
    int32_t      last_tok;     /* sampled, to be evaluated next step */
    /* under the batcher's lock */
    int              refs;
    bool             cancelled;
    enum het_finish  finish;
    char             error[256];
    struct het_strbuf text;
    size_t           safe;     /* text bytes that may be handed out */
    struct het_job_token *toks;/* logprobs: one per generated token */
    size_t           n_toks, cap_toks;
    int32_t          n_gen;
    double           t_submit, t_first, t_end;
    pthread_cond_t   cond;
    het_batcher     *b;
};

struct het_batcher {
    het_model           *model;
    het_sched           *sched;
    het_context         *ctx;
    const het_tokenizer *tok;
    int32_t              n_ctx, n_par, batch_tokens, n_vocab;
    int                  max_queue;
    pthread_mutex_t      mu;
    pthread_cond_t       work;
    pthread_t            thread;
    bool                 running, stop;
    het_job            **queue;    /* ring of max_queue */
    int                  q_head, q_len;
    het_job            **slots;    /* n_par; NULL = free */
    int32_t            **cached;   /* n_par lists of n_ctx: the tokens each sequence's KV cache holds */
    int32_t             *n_cached;
    uint64_t             next_order;
    /* per step scratch (engine thread) */
    struct het_batch_part *parts;
    int32_t              *part_slot, *sampled;
    struct het_job_token *lp;       /* per part: the sampled token's logprobs */
    bool                 *json_done;/* per part: its JSON object is complete  */
    struct het_batcher_stats stats;
};

/* milliseconds on the library's monotonic clock */
static double now_ms(void) { return het_now_us() / 1e3; }

const char *het_finish_name(enum het_finish f)
{
    switch (f) {
    case HET_FINISH_STOP:      return "stop";
    case HET_FINISH_LENGTH:    return "length";
    case HET_FINISH_ERROR:     return "error";
    case HET_FINISH_CANCELLED: return "cancelled";
    case HET_FINISH_NONE:      break;
    }
    return "none";
}

/* ---- jobs ------------------------------------------------------------------ */

static void job_free(het_job *j)
{
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->prompt);
    het_sampler_free(j->smp);
    het_strbuf_free(&j->text);
    free(j->toks);
    pthread_cond_destroy(&j->cond);
    free(j);
}

/* under b->mu */
static void job_unref(het_job *j)
{
    if (--j->refs == 0) job_free(j);
}

/* under b->mu: the job ends (if it has not) and readers are woken */
static void job_end(het_job *j, enum het_finish f, const char *error)
{
    if (j->finish == HET_FINISH_NONE) {
        j->finish = f;
        j->t_end = now_ms();
        if (error) snprintf(j->error, sizeof j->error, "%s", error);
    }
    j->safe = j->text.len;
    pthread_cond_broadcast(&j->cond);
}

static het_job *job_new(const struct het_job_params *p, int32_t n_vocab)
{
    het_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cond, &ca);
    pthread_condattr_destroy(&ca);
    j->prompt = malloc((size_t)p->n_prompt * sizeof *j->prompt);
    j->stop = p->n_stop > 0 ? calloc((size_t)p->n_stop, sizeof *j->stop) : NULL;
    j->smp = het_sampler_init(&p->sampling, n_vocab);
    bool ok = j->prompt && j->smp && (p->n_stop <= 0 || j->stop);
    for (int i = 0; ok && i < p->n_stop; i++) {
        ok = (j->stop[i] = strdup(p->stop[i])) != NULL;
        j->n_stop = i + 1;
    }
    if (!ok) {
        job_free(j);
        return NULL;
    }
    memcpy(j->prompt, p->prompt, (size_t)p->n_prompt * sizeof *j->prompt);
    j->n_prompt = p->n_prompt;
    j->max_tokens = p->max_tokens;
    j->ignore_eos = p->ignore_eos;
    j->logprobs = !p->logprobs ? -1 : p->top_logprobs < 0 ? 0 : p->top_logprobs < HET_JOB_MAX_TOP ? p->top_logprobs
                                                                                               : HET_JOB_MAX_TOP;
    return j;
}

/* ---- text: stop strings and hold-back ---------------------------------------- */

/* earliest occurrence of a stop string that ends after byte `from` */
static bool find_stop(const het_job *j, size_t from, size_t *at)
{
    bool found = false;
    for (int i = 0; i < j->n_stop; i++) {
        size_t L = strlen(j->stop[i]);
        if (L == 0 || L > j->text.len) continue;
        size_t start = from + 1 > L ? from + 1 - L : 0;
        const char *hit = memmem(j->text.p + start, j->text.len - start, j->stop[i], L);
        if (hit && (!found || (size_t)(hit - j->text.p) < *at)) {
            *at = (size_t)(hit - j->text.p);
            found = true;
        }
    }
    return found;
}

/* bytes at the end of the text that might begin a stop string */
static size_t stop_holdback(const het_job *j)
{
    size_t hold = 0;
    for (int i = 0; i < j->n_stop; i++) {
        size_t L = strlen(j->stop[i]);
        for (size_t k = L > 0 ? L - 1 : 0; k > hold; k--)
            if (k <= j->text.len && !memcmp(j->text.p + j->text.len - k, j->stop[i], k)) {
                hold = k;
                break;
            }
    }
    return hold;
}

/* under b->mu: keep the token's logprobs (lp) beside its text */
static bool job_record_token(het_job *j, const struct het_job_token *lp, size_t start, size_t len)
{
    if (j->n_toks == j->cap_toks) {
        size_t cap = j->cap_toks ? 2 * j->cap_toks : 16;
        struct het_job_token *t = realloc(j->toks, cap * sizeof *t);
        if (!t) return false;
        j->toks = t;
        j->cap_toks = cap;
    }
    j->toks[j->n_toks] = *lp;
    j->toks[j->n_toks].start = (uint32_t)start;
    j->toks[j->n_toks++].len = (uint32_t)len;
    return true;
}

/* under b->mu: the engine sampled tok for job j (lp: its logprobs, when
 * asked; json_done: the JSON object it belongs to is complete) */
static bool job_take_token(het_batcher *b, het_job *j, int32_t tok, const struct het_job_token *lp, bool json_done)
{
    if (j->t_first == 0) j->t_first = now_ms();
    if (!j->ignore_eos && het_tokenizer_is_eog(b->tok, tok)) {
        job_end(j, HET_FINISH_STOP, NULL);
        return true;
    }
    j->n_gen++;
    char piece[256];
    int n = het_token_to_piece(b->tok, tok, piece, sizeof piece, false);
    size_t before = j->text.len;
    if (n > 0) het_strbuf_append(&j->text, piece, (size_t)n);
    if (j->text.oom || (j->logprobs >= 0 && !job_record_token(j, lp, before, n > 0 ? (size_t)n : 0))) {
        job_end(j, HET_FINISH_ERROR, "out of memory for the generated text");
        return true;
    }
    if (json_done) {
        job_end(j, HET_FINISH_STOP, NULL);
        return true;
    }
    size_t at = 0;
    if (find_stop(j, before, &at)) {
        j->text.len = at;
        j->text.p[at] = 0;
        job_end(j, HET_FINISH_STOP, NULL);
        return true;
    }
    if (j->n_gen >= j->max_tokens) {
        job_end(j, HET_FINISH_LENGTH, NULL);
        return true;
    }
    size_t hold = stop_holdback(j), tail = het_utf8_incomplete_tail(j->text.p, j->text.len);
    size_t safe = j->text.len - (hold > tail ? hold : tail);
    if (safe > j->safe) {
        j->safe = safe;
        pthread_cond_broadcast(&j->cond);
    }
    j->last_tok = tok;
    return false;
}

/* ---- the engine ------------------------------------------------------------- */

/* under b->mu: empty slot s, dropping the engine's reference; its cache is
 * kept for the next job unless keep_cache is false (after a failed eval) */
static void slot_free(het_batcher *b, int s, bool keep_cache)
{
    if (!keep_cache) {
        het_context_seq_reset(b->ctx, s);
        b->n_cached[s] = 0;
    }
    job_unref(b->slots[s]);
    b->slots[s] = NULL;
    b->stats.active--;
}

/* the free slot whose cached tokens share the longest prefix with j's
 * prompt (on a tie: the one caching least, so long caches survive); *keep:
 * the tokens to reuse, leaving at least one to evaluate for the logits.
 * -1: no free slot. */
static int pick_slot(const het_batcher *b, const het_job *j, int32_t *keep)
{
    int best = -1;
    int32_t best_common = -1;
    for (int s = 0; s < b->n_par; s++) {
        if (b->slots[s]) continue;
        int32_t c = 0, n = b->n_cached[s] < j->n_prompt ? b->n_cached[s] : j->n_prompt;
        while (c < n && b->cached[s][c] == j->prompt[c]) c++;
        if (c > best_common || (c == best_common && b->n_cached[s] < b->n_cached[best])) {
            best = s;
            best_common = c;
        }
    }
    *keep = best_common < j->n_prompt ? best_common : j->n_prompt - 1;
    return best;
}

/* under b->mu: end cancelled jobs, then fill free slots from the queue */
static void reap_and_admit(het_batcher *b)
{
    for (int s = 0; s < b->n_par; s++)
        if (b->slots[s] && b->slots[s]->cancelled) {
            job_end(b->slots[s], HET_FINISH_CANCELLED, NULL);
            slot_free(b, s, true);
        }
    while (b->q_len > 0) {
        int32_t keep = 0;
        int s = pick_slot(b, b->queue[b->q_head], &keep);
        if (s < 0) break;
        het_job *j = b->queue[b->q_head];
        b->q_head = (b->q_head + 1) % b->max_queue;
        b->q_len--;
        if (j->cancelled) {
            job_end(j, HET_FINISH_CANCELLED, NULL);
            job_unref(j);
            continue;
        }
        het_context_seq_keep(b->ctx, s, keep);
        b->n_cached[s] = keep;
        j->n_fed = j->n_cached = keep;
        j->order = b->next_order++;
        b->slots[s] = j;
        b->stats.active++;
        b->stats.cached_tokens += (uint64_t)keep;
    }
    b->stats.queued = b->q_len;
}

/* under b->mu: one part per active job: decodes first, then prompt pieces
 * oldest first within the step's token budget. Returns the part count.
 *
 * A prompt is cut into pieces of batch_tokens - n_par tokens (the last one
 * shorter) from where its evaluation starts, and a piece goes into a step
 * whole or waits for the next: where a prompt is cut never depends on what
 * else is running (docs/serve.md: a prompt evaluated in other pieces can
 * round differently). The oldest waiting piece always fits beside the
 * decodes, which take at most n_par tokens, so no prompt waits for long. */
static int build_batch(het_batcher *b, int32_t *n_tokens)
{
    int n = 0;
    int32_t budget = b->batch_tokens;
    const int32_t piece_max = b->batch_tokens - b->n_par; /* >= 1 (het_batcher_init) */
    bool reading[b->n_par]; /* a prompt still to evaluate, not in this batch yet */
    for (int s = 0; s < b->n_par; s++) {
        het_job *j = b->slots[s];
        reading[s] = j && j->n_fed < j->n_prompt;
        if (!j || reading[s]) continue;
        b->parts[n] = (struct het_batch_part){ s, 1, &j->last_tok };
        b->part_slot[n++] = s;
        budget--;
    }
    for (;;) {
        int best = -1;
        for (int s = 0; s < b->n_par; s++)
            if (reading[s] && (best < 0 || b->slots[s]->order < b->slots[best]->order)) best = s;
        if (best < 0) break;
        het_job *j = b->slots[best];
        reading[best] = false;
        const int32_t piece = j->n_prompt - j->n_fed < piece_max ? j->n_prompt - j->n_fed : piece_max;
        if (piece > budget) continue; /* whole, in a later step; a younger, shorter one may fit now */
        b->parts[n] = (struct het_batch_part){ best, piece, j->prompt + j->n_fed };
        b->part_slot[n++] = best;
        budget -= piece;
    }
    *n_tokens = b->batch_tokens - budget;
    return n;
}

/* without the lock: part i's prompt position, and its token if its prompt is done */
static void sample_part(het_batcher *b, const float *logits, int i)
{
    int s = b->part_slot[i];
    het_job *j = b->slots[s];
    memcpy(b->cached[s] + b->n_cached[s], b->parts[i].tokens, (size_t)b->parts[i].n_tok * sizeof(int32_t));
    b->n_cached[s] += b->parts[i].n_tok;
    b->sampled[i] = -1;
    if (j->n_fed < j->n_prompt) {
        j->n_fed += b->parts[i].n_tok;
        if (j->n_fed < j->n_prompt) return;
        for (int32_t k = 0; k < j->n_prompt; k++) /* the penalties see the prompt too, as llama.cpp's */
            het_sampler_accept(j->smp, j->prompt[k], false);
    }
    const float *row = logits + (size_t)i * b->n_vocab;
    int32_t tok = b->sampled[i] = het_sampler_sample(j->smp, row);
    het_sampler_accept(j->smp, tok, true);
    b->json_done[i] = het_sampler_json_done(j->smp);
    if (j->logprobs >= 0) {
        b->lp[i].id = tok;
        b->lp[i].n_top = j->logprobs < b->n_vocab ? j->logprobs : b->n_vocab;
        b->lp[i].logprob = het_logprobs(row, b->n_vocab, tok, j->logprobs, b->lp[i].top);
    }
}

struct sample_work {
    het_batcher *b;
    const float *logits;
    int          n;
    atomic_int   next;
};

static void *sample_worker(void *arg)
{
    struct sample_work *w = arg;
    for (int i; (i = atomic_fetch_add(&w->next, 1)) < w->n;) sample_part(w->b, w->logits, i);
    return NULL;
}

/* Every part, on as many threads as there are parts and CPUs to run them:
 * each part has its own slot, job and sampler, and a draw over a large
 * vocabulary without top-k (the API's default) takes about a millisecond,
 * which for several slots was a fifth of a decode step on one thread. The
 * parts go to whichever thread asks next, and helper threads end with the
 * step (no thread of this file waits or spins beside the next eval). */
static void sample_parts(het_batcher *b, int n)
{
    struct sample_work w = { .b = b, .logits = het_context_logits(b->ctx, NULL), .n = n };
    atomic_init(&w.next, 0);
    pthread_t helper[SAMPLE_HELPERS_MAX];
    int want = 0, started = 0;
    if (n > 1 && b->n_vocab >= SAMPLE_PARALLEL_VOCAB) {
        cpu_set_t cpus;
        const int n_cpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
        want = (n < n_cpu ? n : n_cpu) - 1;
        if (want > SAMPLE_HELPERS_MAX) want = SAMPLE_HELPERS_MAX;
    }
    while (started < want && pthread_create(&helper[started], NULL, sample_worker, &w) == 0) started++;
    sample_worker(&w); /* a helper that could not start leaves its parts to this thread */
    for (int k = 0; k < started; k++) pthread_join(helper[k], NULL);
}

/* under b->mu */
static void snapshot_stats(het_batcher *b, int n_parts, int32_t n_tokens)
{
    struct het_batcher_stats *st = &b->stats;
    st->steps++;
    st->step_seqs += (uint64_t)n_parts;
    st->step_tokens += (uint64_t)n_tokens;
    struct het_sched_stats ss;
    het_sched_get_stats(b->sched, &ss);
    st->fallbacks = ss.n_fallbacks;
    int nd = het_sched_n_devices(b->sched);
    st->n_devices = nd < 4 ? nd : 4;
    for (int i = 0; i < st->n_devices; i++) {
        const het_device *d = het_sched_device(b->sched, i);
        struct het_device_stats ds;
        het_device_get_stats(d, &ds);
        snprintf(st->device_name[i], sizeof st->device_name[i], "%s", het_device_name(d));
        st->device_busy_us[i] = ds.busy_us;
        st->device_splits[i] = ds.n_splits;
    }
}

/* under b->mu, returns with it held: evaluate one batch and publish */
static void run_step(het_batcher *b)
{
    int32_t n_tokens = 0;
    int n = build_batch(b, &n_tokens);
    if (n == 0) return;
    pthread_mutex_unlock(&b->mu);
    het_error err = { 0 };
    enum het_status st = het_context_eval_batch(b->ctx, b->parts, n, false, &err);
    if (st == HET_OK) sample_parts(b, n);
    pthread_mutex_lock(&b->mu);
    for (int i = 0; i < n; i++) {
        int s = b->part_slot[i];
        het_job *j = b->slots[s];
        if (st != HET_OK) {
            job_end(j, HET_FINISH_ERROR, err.msg);
            slot_free(b, s, false);
        } else if (b->sampled[i] >= 0 && job_take_token(b, j, b->sampled[i], &b->lp[i], b->json_done[i])) {
            slot_free(b, s, true);
        }
    }
    snapshot_stats(b, n, n_tokens);
}

/* under b->mu: every queued job ends with an error (the engine stops) */
static void end_queued(het_batcher *b)
{
    for (; b->q_len > 0; b->q_len--, b->q_head = (b->q_head + 1) % b->max_queue) {
        job_end(b->queue[b->q_head], HET_FINISH_ERROR, "the server is stopping");
        job_unref(b->queue[b->q_head]);
    }
    b->stats.queued = 0;
}

static void *engine_main(void *arg)
{
    het_batcher *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        reap_and_admit(b);
        if (b->stop) break;
        if (b->stats.active == 0) {
            pthread_cond_wait(&b->work, &b->mu);
            continue;
        }
        run_step(b);
    }
    /* stopping: every job still here ends with an error */
    for (int s = 0; s < b->n_par; s++)
        if (b->slots[s]) {
            job_end(b->slots[s], HET_FINISH_ERROR, "the server is stopping");
            slot_free(b, s, true);
        }
    end_queued(b);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* ---- public -------------------------------------------------------------------- */

het_batcher *het_batcher_init(const struct het_batcher_params *p, het_error *err)
{
    het_batcher *b = calloc(1, sizeof *b);
    if (!b) {
        het_error_set(err, HET_ERR_NOMEM, "batcher: out of memory");
        return NULL;
    }
    b->model = p->model;
    b->sched = p->sched;
    b->tok = het_model_tokenizer(p->model);
    b->n_vocab = het_model_get_config(p->model)->n_vocab;
    b->n_par = p->n_parallel > 0 ? p->n_parallel : 4;
    b->batch_tokens = p->batch_tokens > 0 ? p->batch_tokens : 512;
    if (b->batch_tokens < b->n_par + 1) b->batch_tokens = b->n_par + 1;
    b->max_queue = p->max_queue > 0 ? p->max_queue : 64;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL);
    b->queue = calloc((size_t)b->max_queue, sizeof *b->queue);
    b->slots = calloc((size_t)b->n_par, sizeof *b->slots);
    b->parts = calloc((size_t)b->n_par, sizeof *b->parts);
    b->part_slot = calloc((size_t)b->n_par, sizeof *b->part_slot);
    b->sampled = calloc((size_t)b->n_par, sizeof *b->sampled);
    b->lp = calloc((size_t)b->n_par, sizeof *b->lp);
    b->json_done = calloc((size_t)b->n_par, sizeof *b->json_done);
    b->cached = calloc((size_t)b->n_par, sizeof *b->cached);
    b->n_cached = calloc((size_t)b->n_par, sizeof *b->n_cached);
    if (!b->queue || !b->slots || !b->parts || !b->part_slot || !b->sampled || !b->lp || !b->json_done || !b->cached ||
        !b->n_cached) {
        het_error_set(err, HET_ERR_NOMEM, "batcher: out of memory");
        het_batcher_free(b);
        return NULL;
    }
    struct het_context_params cp = { .n_ctx = p->n_ctx, .n_seq = b->n_par, .sched = p->sched,
                                      .pool = het_sched_pool(p->sched) }; /* KV caches in the shared pool */
    b->ctx = het_context_init(p->model, &cp, err);
    if (!b->ctx) {
        het_batcher_free(b);
        return NULL;
    }
    b->n_ctx = het_context_n_ctx(b->ctx);
    for (int s = 0; s < b->n_par; s++)
        if (!(b->cached[s] = malloc((size_t)b->n_ctx * sizeof *b->cached[s]))) {
            het_error_set(err, HET_ERR_NOMEM, "batcher: out of memory");
            het_batcher_free(b);
            return NULL;
        }
    b->stats.n_parallel = b->n_par;
    b->stats.max_queue = b->max_queue;
    return b;
}

het_context *het_batcher_context(het_batcher *b) { return b->ctx; }
int32_t het_batcher_n_ctx(const het_batcher *b) { return b->n_ctx; }

enum het_status het_batcher_start(het_batcher *b, het_error *err)
{
    if (b->running) return HET_OK;
    int rc = pthread_create(&b->thread, NULL, engine_main, b);
    if (rc) return het_error_set(err, HET_ERR_NOMEM, "batcher: cannot start its thread (%s)", strerror(rc));
    b->running = true;
    return HET_OK;
}

void het_batcher_stop(het_batcher *b)
{
    if (!b) return;
    if (!b->running) { /* never started: what was queued ends here */
        pthread_mutex_lock(&b->mu);
        b->stop = true;
        end_queued(b);
        pthread_mutex_unlock(&b->mu);
        return;
    }
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL);
    b->running = false;
}

void het_batcher_free(het_batcher *b)
{
    if (!b) return;
    het_batcher_stop(b);
    het_context_free(b->ctx);
    free(b->queue);
    free(b->slots);
    free(b->parts);
    free(b->part_slot);
    free(b->sampled);
    free(b->lp);
    free(b->json_done);
    for (int s = 0; b->cached && s < b->n_par; s++) free(b->cached[s]);
    free(b->cached);
    free(b->n_cached);
    pthread_cond_destroy(&b->work);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

static enum het_submit check_job(const het_batcher *b, const struct het_job_params *p, char *msg, size_t cap)
{
    if (p->n_prompt < 1) {
        snprintf(msg, cap, "the prompt has no tokens");
        return HET_SUBMIT_INVALID;
    }
    if (p->max_tokens < 1 || (int64_t)p->n_prompt + p->max_tokens > b->n_ctx) {
        snprintf(msg, cap, "prompt of %d tokens + max_tokens %d exceed the context of %d tokens", p->n_prompt,
                 p->max_tokens, b->n_ctx);
        return HET_SUBMIT_INVALID;
    }
    for (int32_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] < 0 || p->prompt[i] >= b->n_vocab) {
            snprintf(msg, cap, "token %d at index %d is not in the vocabulary (0..%d)", p->prompt[i], i,
                     b->n_vocab - 1);
            return HET_SUBMIT_INVALID;
        }
    return HET_SUBMIT_OK;
}

enum het_submit het_batcher_submit(het_batcher *b, const struct het_job_params *p, het_job **out, char *msg,
                                   size_t cap)
{
    *out = NULL;
    enum het_submit r = check_job(b, p, msg, cap);
    if (r != HET_SUBMIT_OK) return r;
    het_job *j = job_new(p, b->n_vocab);
    if (!j) {
        snprintf(msg, cap, "out of memory");
        return HET_SUBMIT_NOMEM;
    }
    j->b = b;
    j->refs = 2;
    j->t_submit = now_ms();
    pthread_mutex_lock(&b->mu);
    if (b->stop) r = HET_SUBMIT_STOPPED;
    else if (b->q_len == b->max_queue) r = HET_SUBMIT_FULL;
    if (r != HET_SUBMIT_OK) {
        pthread_mutex_unlock(&b->mu);
        snprintf(msg, cap, r == HET_SUBMIT_FULL ? "the queue is full (%d waiting)" : "the server is stopping",
                 b->max_queue);
        job_free(j);
        return r;
    }
    b->queue[(b->q_head + b->q_len++) % b->max_queue] = j;
    b->stats.queued = b->q_len;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
    *out = j;
    return HET_SUBMIT_OK;
}

static void fill_info(const het_job *j, struct het_job_info *info)
{
    info->finish = j->finish;
    info->n_prompt = j->n_prompt;
    info->n_gen = j->n_gen;
    info->n_cached = j->n_cached;
    info->ttft_ms = j->t_first > 0 ? j->t_first - j->t_submit : 0;
    info->decode_ms = j->t_end > 0 && j->t_first > 0 ? j->t_end - j->t_first : 0;
    snprintf(info->error, sizeof info->error, "%s", j->error);
}

void het_job_tokens_free(struct het_job_tokens *t)
{
    free(t->v);
    *t = (struct het_job_tokens){ 0 };
}

/* under b->mu: hand out the tokens whose text is out (all that are left of
 * the text once the job has ended: a stop string may have cut it) */
static void take_tokens(const het_job *j, size_t have, struct het_job_tokens *t)
{
    bool ended = j->finish != HET_FINISH_NONE;
    for (; t->next < j->n_toks; t->next++) {
        const struct het_job_token *k = &j->toks[t->next];
        if (ended ? k->start > j->text.len || (k->start == j->text.len && k->len > 0) : k->start + k->len > have)
            break;
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 16;
            struct het_job_token *v = realloc(t->v, cap * sizeof *v);
            if (!v) {
                t->oom = true;
                return;
            }
            t->v = v;
            t->cap = cap;
        }
        t->v[t->n++] = *k;
    }
}

bool het_job_wait(het_job *j, struct het_strbuf *out, size_t *have, struct het_job_tokens *toks, int timeout_ms,
                  struct het_job_info *info)
{
    het_batcher *b = j->b;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->mu);
    while (*have >= j->safe && j->finish == HET_FINISH_NONE)
        if (pthread_cond_timedwait(&j->cond, &b->mu, &dl) == ETIMEDOUT) break;
    if (j->safe > *have) {
        het_strbuf_append(out, j->text.p + *have, j->safe - *have);
        *have = j->safe;
    }
    if (toks) take_tokens(j, *have, toks);
    if (info) fill_info(j, info);
    bool done = j->finish != HET_FINISH_NONE && *have >= j->text.len;
    pthread_mutex_unlock(&b->mu);
    return done;
}

void het_job_release(het_job *j)
{
    if (!j) return;
    het_batcher *b = j->b;
    pthread_mutex_lock(&b->mu);
    if (j->finish == HET_FINISH_NONE) {
        j->cancelled = true;
        pthread_cond_signal(&b->work);
    }
    job_unref(j);
    pthread_mutex_unlock(&b->mu);
}

void het_batcher_get_stats(het_batcher *b, struct het_batcher_stats *out)
{
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    pthread_mutex_unlock(&b->mu);
}
