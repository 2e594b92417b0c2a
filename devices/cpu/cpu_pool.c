/*
 * cpu_pool.c — the CPU device's threads: n - 1 workers made with the device
 * and kept until it is freed, and the one job at a time that the calling
 * thread posts to them and runs itself as well.
 *
 * Why not an OpenMP parallel region per split: a region starts by waking its
 * team and ends with the caller waiting for every thread of the team to
 * arrive, including a thread that has not even been scheduled since it was
 * woken, or that took no part. On a machine where other processes hold the
 * cores, a ~1 ms evaluation then stalls for a whole time slice (several
 * ms) at its end. Here the caller waits only for workers that are inside
 * the job, and a worker is inside only while it runs the job's code.
 *
 * The job word is gen << 32 | open | workers inside. Posting a job writes
 * its function and argument, then a new generation with `open` set (the
 * release that publishes them), then bumps `posted`, the futex word idle
 * workers sleep on. A worker enters with one compare-and-swap that adds
 * itself to `inside` only if the generation is the one it woke for and the
 * job is still open; one that comes late (the job ended, or another began)
 * fails it and goes back to waiting without having read anything of the
 * job. When the caller's own run of the job returns, it clears `open` (no
 * one enters any more) and waits until `inside` is zero.
 *
 * A worker that must wait for other threads inside the job (a step whose
 * last parts are on them, cpu_sync.c) steps out first: leaves `inside` and
 * waits on the shared steps, which are pool memory and outlive the job.
 * Afterwards it steps back in with the same compare-and-swap; if the job
 * ended meanwhile, it must not run another line of the job's code (that
 * code reads tensors of a graph that may be gone), so it longjmps from the
 * wait back to its loop: the kernels it leaves hold no resources across a
 * step (no allocation, no lock), which is the kernels' contract.
 *
 * Waiting never holds a core for long: idle workers, the caller at the end
 * of a job, and threads at the end of a step spin for at most 50 us, then
 * sleep on a futex; whoever changes what they wait for calls FUTEX_WAKE
 * only when someone sleeps, so a job costs a wake-up only when the workers
 * had gone to sleep (one per job, not one per node). That wake-up can be
 * slow (a VM's halted vCPU came back milliseconds late here), so a caller
 * that knows a job is coming says so first (het_cpu_pool_expect): sleeping
 * workers wake then and spin for the job, at most 1 ms, then sleep again.
 */
#include "devices/cpu/cpu_pool.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HET_POOL_SPIN_NS 50000 /* spin this long, then sleep */
#define HET_POOL_EXPECT_NS 1000000 /* after het_cpu_pool_expect, spin this long for the job */

#define JOB_OPEN   ((uint64_t)1 << 31)
#define JOB_INSIDE (JOB_OPEN - 1)

struct het_cpu_seat {
    het_cpu_pool *pool;
    int           ith;
    unsigned      gen;    /* the job this worker entered */
    jmp_buf       escape; /* back to the worker's loop when that job ended */
    pthread_t     thread;
    bool          started;
};

struct het_cpu_pool {
    /* written by the caller only, read by workers after they entered */
    het_cpu_job_fn *fn;
    void           *arg;
    void          (*delay)(void *ctx, int ith);
    void           *delay_ctx;
    int             n_threads;
    struct het_cpu_seat *seats; /* n_threads - 1 workers */

    alignas(64) _Atomic uint64_t job;  /* gen << 32 | JOB_OPEN | workers inside          */
    _Atomic unsigned posted;           /* generation of the last job: idle workers sleep on it */
    _Atomic int      idle_sleepers;
    _Atomic unsigned expected;         /* bumped by het_cpu_pool_expect                     */
    _Atomic bool     stop;
    alignas(64) _Atomic unsigned left; /* bumped when a closed job's last worker left: the caller sleeps on it */
    _Atomic int      caller_sleeping;
    alignas(64) _Atomic long n_jobs, n_entered, n_late, n_escaped;
    alignas(64) struct het_cpu_sync sync; /* every job's steps */
};

static inline void pool_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A bounded spin: for (struct spin sp = { 0 }; !cond;) if (!spin_on(&sp)) break; */
struct spin {
    int     i;
    int64_t t0;
};

static bool spin_for(struct spin *sp, int64_t ns)
{
    pool_relax();
    if (++sp->i % 64) return true;
    const int64_t t = now_ns();
    if (!sp->t0) sp->t0 = t;
    return t - sp->t0 <= ns;
}

static bool spin_on(struct spin *sp) { return spin_for(sp, HET_POOL_SPIN_NS); }

static void futex_wait(_Atomic unsigned *word, unsigned expect)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}

static void futex_wake(_Atomic unsigned *word, int n)
{
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* Into job gen, if it is still open. */
static bool job_enter(het_cpu_pool *pool, unsigned gen)
{
    uint64_t v = atomic_load(&pool->job);
    do {
        if ((unsigned)(v >> 32) != gen || !(v & JOB_OPEN)) return false;
    } while (!atomic_compare_exchange_weak(&pool->job, &v, v + 1));
    return true;
}

/* Out of the job; the last one out of a closed job tells the caller. */
static void job_leave(het_cpu_pool *pool)
{
    const uint64_t v = atomic_fetch_sub(&pool->job, 1) - 1;
    if (!(v & JOB_OPEN) && !(v & JOB_INSIDE)) {
        atomic_fetch_add(&pool->left, 1u);
        if (atomic_load(&pool->caller_sleeping)) futex_wake(&pool->left, 1);
    }
}

void het_cpu_seat_out(struct het_cpu_seat *seat) { job_leave(seat->pool); }

void het_cpu_seat_in(struct het_cpu_seat *seat)
{
    if (job_enter(seat->pool, seat->gen)) return;
    atomic_fetch_add_explicit(&seat->pool->n_escaped, 1, memory_order_relaxed);
    longjmp(seat->escape, 1);
}

/* Run the job this worker entered; a failed het_cpu_seat_in lands here,
 * already out of the job. */
static void worker_run(struct het_cpu_seat *seat)
{
    het_cpu_pool *pool = seat->pool;
    if (setjmp(seat->escape)) return;
    struct het_cpu_worker w;
    het_cpu_worker_init(&w, &pool->sync);
    w.seat = seat;
    pool->fn(pool->arg, &w, seat->ith);
    job_leave(pool);
}

/* Until a job after `seen` is posted (or the pool stops): its generation. */
static unsigned wait_posted(het_cpu_pool *pool, unsigned seen)
{
    for (struct spin sp = { 0 }; atomic_load_explicit(&pool->posted, memory_order_relaxed) == seen;)
        if (!spin_on(&sp)) break;
    if (atomic_load(&pool->posted) != seen) return atomic_load(&pool->posted);
    for (;;) {
        const unsigned ex = atomic_load(&pool->expected);
        atomic_fetch_add(&pool->idle_sleepers, 1);
        const bool wait = atomic_load(&pool->posted) == seen && !atomic_load(&pool->stop);
        if (wait) futex_wait(&pool->posted, seen);
        atomic_fetch_sub(&pool->idle_sleepers, 1);
        if (!wait || atomic_load(&pool->posted) != seen || atomic_load(&pool->stop)) break;
        if (atomic_load(&pool->expected) == ex) continue;
        /* woken because a job is coming: stay up for it a while */
        for (struct spin sp = { 0 }; atomic_load_explicit(&pool->posted, memory_order_relaxed) == seen;)
            if (!spin_for(&sp, HET_POOL_EXPECT_NS)) break;
        if (atomic_load(&pool->posted) != seen) break;
    }
    return atomic_load(&pool->posted);
}

static void *worker_main(void *arg)
{
    struct het_cpu_seat *seat = arg;
    het_cpu_pool *pool = seat->pool;
    unsigned seen = 0;
    for (;;) {
        seen = wait_posted(pool, seen);
        if (atomic_load(&pool->stop)) break;
        if (pool->delay) pool->delay(pool->delay_ctx, seat->ith);
        if (!job_enter(pool, seen)) {
            atomic_fetch_add_explicit(&pool->n_late, 1, memory_order_relaxed);
            continue;
        }
        atomic_fetch_add_explicit(&pool->n_entered, 1, memory_order_relaxed);
        seat->gen = seen;
        worker_run(seat);
    }
    return NULL;
}

het_cpu_pool *het_cpu_pool_new(int n_threads, het_error *err)
{
    if (n_threads < 1) n_threads = 1;
    het_cpu_pool *pool = aligned_alloc(64, (sizeof *pool + 63) & ~(size_t)63);
    if (!pool) {
        het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory for the thread pool");
        return NULL;
    }
    memset(pool, 0, sizeof *pool);
    pool->n_threads = n_threads;
    atomic_init(&pool->job, 0);
    atomic_init(&pool->posted, 0u);
    atomic_init(&pool->idle_sleepers, 0);
    atomic_init(&pool->expected, 0u);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->left, 0u);
    atomic_init(&pool->caller_sleeping, 0);
    atomic_init(&pool->n_jobs, 0);
    atomic_init(&pool->n_entered, 0);
    atomic_init(&pool->n_late, 0);
    atomic_init(&pool->n_escaped, 0);
    het_cpu_sync_init(&pool->sync);
    pool->sync.pooled = true;
    if (n_threads == 1) return pool;
    pool->seats = calloc((size_t)n_threads - 1, sizeof *pool->seats);
    if (!pool->seats) {
        free(pool);
        het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory for the thread pool");
        return NULL;
    }
    for (int i = 0; i < n_threads - 1; i++) {
        struct het_cpu_seat *s = &pool->seats[i];
        s->pool = pool;
        s->ith = i + 1;
        int rc = pthread_create(&s->thread, NULL, worker_main, s);
        if (rc != 0) {
            het_cpu_pool_free(pool);
            het_error_set(err, HET_ERR_NOMEM, "cpu: cannot start worker thread %d of %d: %s", i + 1,
                          n_threads - 1, strerror(rc));
            return NULL;
        }
        s->started = true;
        char name[32];
        snprintf(name, sizeof name, "het-cpu-%d", i + 1);
        name[15] = '\0'; /* the kernel's limit */
        pthread_setname_np(s->thread, name);
    }
    return pool;
}

void het_cpu_pool_free(het_cpu_pool *pool)
{
    if (!pool) return;
    atomic_store(&pool->stop, true);
    atomic_fetch_add(&pool->posted, 1u);
    futex_wake(&pool->posted, INT_MAX);
    for (int i = 0; pool->seats && i < pool->n_threads - 1; i++)
        if (pool->seats[i].started) pthread_join(pool->seats[i].thread, NULL);
    free(pool->seats);
    free(pool);
}

int het_cpu_pool_n_threads(const het_cpu_pool *pool) { return pool->n_threads; }

void het_cpu_pool_expect(het_cpu_pool *pool)
{
    if (pool->n_threads == 1) return;
    atomic_fetch_add(&pool->expected, 1u);
    if (atomic_load(&pool->idle_sleepers) > 0) futex_wake(&pool->posted, INT_MAX);
}

struct het_cpu_sync *het_cpu_pool_sync(het_cpu_pool *pool) { return &pool->sync; }

/* Until no worker is inside the (closed) job. */
static void wait_inside_empty(het_cpu_pool *pool)
{
    for (struct spin sp = { 0 }; atomic_load_explicit(&pool->job, memory_order_relaxed) & JOB_INSIDE;)
        if (!spin_on(&sp)) break;
    /* (the seq_cst load also orders the workers' accesses before ours) */
    if (!(atomic_load(&pool->job) & JOB_INSIDE)) return;
    for (;;) {
        const unsigned e = atomic_load(&pool->left);
        atomic_store(&pool->caller_sleeping, 1);
        const bool empty = !(atomic_load(&pool->job) & JOB_INSIDE);
        if (!empty) futex_wait(&pool->left, e);
        atomic_store(&pool->caller_sleeping, 0);
        if (empty) break;
    }
}

void het_cpu_pool_run(het_cpu_pool *pool, het_cpu_job_fn *fn, void *arg)
{
    struct het_cpu_worker w;
    het_cpu_worker_init(&w, &pool->sync);
    if (pool->n_threads == 1) {
        fn(arg, &w, 0);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    const unsigned gen = (unsigned)(atomic_load(&pool->job) >> 32) + 1;
    atomic_store(&pool->job, (uint64_t)gen << 32 | JOB_OPEN);
    atomic_store(&pool->posted, gen);
    if (atomic_load(&pool->idle_sleepers) > 0) futex_wake(&pool->posted, INT_MAX);
    atomic_fetch_add_explicit(&pool->n_jobs, 1, memory_order_relaxed);

    fn(arg, &w, 0);

    atomic_fetch_and(&pool->job, ~JOB_OPEN);
    wait_inside_empty(pool);
}

void het_cpu_pool_get_stats(het_cpu_pool *pool, struct het_cpu_pool_stats *st)
{
    st->jobs = atomic_load(&pool->n_jobs);
    st->entered = atomic_load(&pool->n_entered);
    st->late = atomic_load(&pool->n_late);
    st->escaped = atomic_load(&pool->n_escaped);
}

void het_cpu_pool_set_delay(het_cpu_pool *pool, void (*delay)(void *ctx, int ith), void *ctx)
{
    pool->delay = delay;
    pool->delay_ctx = ctx;
}
