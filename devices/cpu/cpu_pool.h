/*
 * cpu_pool.h — the CPU device's own threads (cpu_pool.c): workers that live
 * as long as the device and join whatever job the calling thread posts.
 */
#ifndef HET_CPU_POOL_H
#define HET_CPU_POOL_H

#include "devices/cpu/cpu_ops.h"
#include "het/status.h"

typedef struct het_cpu_pool het_cpu_pool;

/* What a job runs on every thread that takes part: the caller (ith 0) and
 * each worker that entered in time (ith 1..n-1, its own). w is the thread's
 * place in the pool's shared steps (het_cpu_pool_sync); fn sets w->step. */
typedef void het_cpu_job_fn(void *arg, struct het_cpu_worker *w, int ith);

/* n_threads counts the caller: n_threads - 1 workers are started. */
het_cpu_pool *het_cpu_pool_new(int n_threads, het_error *err);
void          het_cpu_pool_free(het_cpu_pool *pool);
int           het_cpu_pool_n_threads(const het_cpu_pool *pool);
/* A job is coming soon: sleeping workers wake now and wait for it spinning
 * (at most 1 ms), so that the time a sleeping core takes to come back is
 * spent while the caller still prepares the job. */
void          het_cpu_pool_expect(het_cpu_pool *pool);
/* The steps every job's threads share: pool memory, so a worker may wait on
 * them after it stepped out of a job that then ended. */
struct het_cpu_sync *het_cpu_pool_sync(het_cpu_pool *pool);

/* Post a job and run fn(arg, ..., 0) on the calling thread; workers that
 * wake while it is open run fn too. Returns once fn returned here and every
 * worker that entered has left: workers that never entered (asleep, not
 * scheduled, delayed) are not waited for, and will not enter any more. One
 * caller at a time. */
void het_cpu_pool_run(het_cpu_pool *pool, het_cpu_job_fn *fn, void *arg);

/* For cpu_sync.c: a worker about to wait for others steps out of its job (it
 * no longer holds the job open) and back in after the wait. Stepping back in
 * fails once the job has ended: then it does not return, but jumps back to
 * the worker's loop, so no line of the job's code runs on a finished job. */
void het_cpu_seat_out(struct het_cpu_seat *seat);
void het_cpu_seat_in(struct het_cpu_seat *seat);

/* Counts since the pool was made, for tests and diagnostics. */
struct het_cpu_pool_stats {
    long jobs;     /* jobs posted (run with more than one thread)           */
    long entered;  /* workers that entered a job                            */
    long late;     /* workers that woke for a job already over: not entered */
    long escaped;  /* workers whose job ended while they waited in it       */
};
void het_cpu_pool_get_stats(het_cpu_pool *pool, struct het_cpu_pool_stats *st);

/* Tests: run delay(ctx, ith) in each worker after it wakes for a job and
 * before it tries to enter (a worker that is late on purpose). Set it while
 * no job runs. */
void het_cpu_pool_set_delay(het_cpu_pool *pool, void (*delay)(void *ctx, int ith), void *ctx);

#endif /* HET_CPU_POOL_H */
