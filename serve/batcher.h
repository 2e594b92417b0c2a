/*
 * batcher.h — the continuous-batching engine of one route.
 *
 * A het_batcher owns a context of n_parallel sequences and one thread that
 * runs it. Requests (jobs) wait in a bounded queue until a sequence slot is
 * free; every step then evaluates one batch holding each active job: a chunk
 * of a prompt still being read, or the one token a decoding job sampled last.
 * Each job samples with its own sampler, and its text grows as tokens are
 * produced; readers wait for new text with het_job_wait. A reader that goes
 * away releases its job, and the job's slot is freed at the next step.
 */
#ifndef HET_SERVE_BATCHER_H
#define HET_SERVE_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#include "het/model.h"
#include "serve/strbuf.h"

typedef struct het_batcher het_batcher;
typedef struct het_job het_job;

struct het_batcher_params {
    het_model *model;
    het_sched *sched;
    int32_t    n_ctx;        /* per sequence (0: model default)          */
    int32_t    n_parallel;   /* sequences (0: 4)                         */
    int32_t    batch_tokens; /* prompt tokens per step (0: 512)          */
    int        max_queue;    /* waiting jobs (0: 64)                     */
};

het_batcher *het_batcher_init(const struct het_batcher_params *p, het_error *err);
/* The context, for calibration before het_batcher_start (not after). */
het_context *het_batcher_context(het_batcher *b);
int32_t      het_batcher_n_ctx(const het_batcher *b);
enum het_status het_batcher_start(het_batcher *b, het_error *err);
/* Stop the thread; jobs still queued or running end with an error. */
void het_batcher_stop(het_batcher *b);
void het_batcher_free(het_batcher *b);   /* stops first; NULL is a no-op */

enum het_finish {
    HET_FINISH_NONE = 0,    /* still running                                 */
    HET_FINISH_STOP,        /* end-of-generation token or a stop string      */
    HET_FINISH_LENGTH,      /* max_tokens reached                            */
    HET_FINISH_ERROR,       /* evaluation failed or the server is stopping   */
    HET_FINISH_CANCELLED,   /* released by its reader before the end         */
};
const char *het_finish_name(enum het_finish f);   /* "stop", "length", ... */

struct het_job_params {
    const int32_t *prompt;       /* copied                                     */
    int32_t        n_prompt;
    int32_t        max_tokens;
    struct het_sampler_params sampling;
    const char *const *stop;     /* stop strings, copied; may be NULL          */
    int            n_stop;
    bool           ignore_eos;   /* keep going past end-of-generation tokens   */
    bool           logprobs;     /* record each token's log-probability ...   */
    int            top_logprobs; /* ... and this many alternatives (<= HET_JOB_MAX_TOP) */
};
#define HET_JOB_MAX_TOP 20

/* One generated token, for logprobs: where its text lies in the job's text. */
struct het_job_token {
    int32_t  id;
    float    logprob;
    uint32_t start, len;      /* bytes of the job's text                      */
    int      n_top;
    struct het_token_logprob top[HET_JOB_MAX_TOP];
};
/* What het_job_wait hands out of a job's tokens: appended to v; next counts
 * the job's tokens handed out so far (keep it between waits). */
struct het_job_tokens {
    struct het_job_token *v;
    size_t n, cap, next;
    bool   oom;
};
void het_job_tokens_free(struct het_job_tokens *t);

enum het_submit {
    HET_SUBMIT_OK = 0,
    HET_SUBMIT_FULL,        /* the queue is full: try again later            */
    HET_SUBMIT_INVALID,     /* does not fit the context, or no tokens        */
    HET_SUBMIT_STOPPED,     /* the engine is stopping                        */
    HET_SUBMIT_NOMEM,
};
/* Queue a job; *out is the caller's reference (release it with
 * het_job_release). msg (cap bytes) says why when not OK. Jobs queued
 * before het_batcher_start wait for it (and are admitted together). */
enum het_submit het_batcher_submit(het_batcher *b, const struct het_job_params *p, het_job **out, char *msg,
                                   size_t cap);

struct het_job_info {
    enum het_finish finish;
    int32_t n_prompt;
    int32_t n_gen;          /* tokens generated (not counting end-of-generation) */
    int32_t n_cached;       /* prompt tokens reused from a slot's KV cache        */
    double  ttft_ms;        /* submit to first sampled token (0 if none yet)      */
    double  decode_ms;      /* first token to the end (0 while running)          */
    char    error[256];     /* HET_FINISH_ERROR: why                              */
};
/* Wait up to timeout_ms for text past *have bytes, or the end. New text is
 * appended to out and *have advanced; with toks (and logprobs asked), the
 * tokens whose text is now wholly handed out are appended to it. Returns
 * true when the job has ended and all its text has been handed out. */
bool het_job_wait(het_job *j, struct het_strbuf *out, size_t *have, struct het_job_tokens *toks, int timeout_ms,
                  struct het_job_info *info);
/* Drop the caller's reference; a job not finished is cancelled. */
void het_job_release(het_job *j);

struct het_batcher_stats {
    int      queued, active, n_parallel, max_queue;
    uint64_t steps;             /* batches evaluated                      */
    uint64_t step_seqs;         /* sum over steps of sequences in it      */
    uint64_t step_tokens;       /* sum over steps of tokens in it         */
    uint64_t fallbacks;         /* scheduler fallbacks                    */
    uint64_t cached_tokens;     /* prompt tokens reused from slot caches  */
    int      n_devices;
    char     device_name[4][32];
    double   device_busy_us[4];
    uint64_t device_splits[4];
};
void het_batcher_get_stats(het_batcher *b, struct het_batcher_stats *out);

#endif /* HET_SERVE_BATCHER_H */
