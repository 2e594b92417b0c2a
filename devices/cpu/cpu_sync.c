/*
 * cpu_sync.c — how the CPU device's threads share a node's work: parts
 * handed out one at a time to whichever thread asks, and the end of a step
 * (every part done), which is also all the threads ever wait for.
 *
 * Why not rows split evenly between the threads and a barrier after each
 * node: on a machine where other processes compete for the cores (a laptop
 * with a browser open, a server running other work), a thread is often not
 * running. With a static split the running thread finishes its half, then
 * waits for the other to be scheduled again, at every one of the hundreds
 * of barriers of a decode step. Here a step ends when its parts are done,
 * whoever did them: a thread that is not running holds at most the one part
 * it was in when it lost its core, and one that falls behind skips the steps
 * that ended without it (their parts are all handed out).
 *
 * The parts form runs of adjacent parts, one per thread (up to
 * HET_CPU_SYNC_RUNS): a thread takes the next part of its own run first, so
 * on a quiet machine it streams one contiguous range, as a static split
 * would, and the hardware and software prefetches run on from one part into
 * the next; once its run is out it takes the next part of another run
 * (whichever thread is behind, or not running, loses those to it). A run's
 * state is one word on a cache line of its own, step << 32 | parts done <<
 * 16 | next part; a word still tagged with an earlier step is this step's
 * run untouched, and the first taker starts it. A part done is counted in
 * its run's word, by the same CAS that takes the owner's next part, so on a
 * quiet machine a part costs one atomic operation on a line no other thread
 * touches until its own run is out. The step is over when every run's
 * parts are done; the thread whose count completes a run looks at the
 * others', and the one that finds them all complete opens the next step in
 * the step word (step << 32), the only line every step writes once. (A
 * part done counted in the step word instead, one shared line, cost a
 * cross-CCD transfer a part: this way took 0.993-0.999 of its token time on two
 * CCDs, Zen 5, in-process A/B.) (Handing out parts from one
 * shared counter in turn, as before, gave each thread a new stream whenever
 * the threads did not alternate: with memory at ~90 GB/s, layer-sized q4_0
 * matmuls ran at 0.72-0.79 of the read that way against 0.80 with the
 * static split, q8_0 0.82-0.83 against 0.87-0.90; bench_stream, Zen 5.)
 * Each thread counts the steps it has been through (every thread walks the
 * same nodes and takes the same decisions, so they agree on the numbering);
 * the step tag in the words tells a late thread that its step is over.
 *
 * Waiting for a step to end spins briefly on the word (the part still out
 * is on a running thread, most of the time, on a quiet machine: a few
 * microseconds), then sleeps on a futex, so a thread with nothing to do
 * never holds a core another process or thread needs, and no wake-up is
 * paid unless a wait outlasted the spin. The thread that closes a step bumps
 * `epoch` and wakes sleepers, if there are any. A sleeper reads the epoch
 * before it checks the word, so either it sees the step closed or the
 * closer's bump makes FUTEX_WAIT return (sleepers and epoch are
 * sequentially consistent, so the closer sees the sleeper or the sleeper
 * sees the bump).
 *
 * A thread that waits has nothing to compute, and in decode the memory has
 * nothing to read meanwhile (a norm, a rope or the attention runs between
 * two matmuls, often on one thread): so before spinning it asks, 2 KB at a
 * time, for the start of the weights the next matmul streams (the device
 * names them in worker->ahead, at most HET_CPU_AHEAD_MAX bytes a step), and
 * that matmul's first parts begin from the caches instead of memory.
 *
 * In a job of the device's thread pool (cpu_pool.c) not every thread takes
 * part: a worker that wakes late starts at the node the caller is in and
 * skips the steps that are over, or finds the job ended and stays out. A
 * worker that must wait for a step to end steps out of the job for the wait
 * (the job may end without it meanwhile; then it never comes back into the
 * job's code). het_cpu_sync_all, in a node whose steps depend on data the
 * node wrote, cannot wait for every thread of the pool: such a node is
 * entered through a gate (het_cpu_node_enter) that counts the workers in
 * it; the first thread to reach het_cpu_sync_all closes the gate, and the
 * step ends once the caller and every counted worker have arrived. A worker
 * that finds the gate closed, or a later node's, leaves the job.
 *
 * Without a worker (kernels run by tests straight from a parallel region),
 * thread ith takes parts ith, ith + nth, ... and steps end at an OpenMP
 * barrier: the static split, kept so the tests can compare the two.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_pool.h"

#include <immintrin.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HET_SYNC_SPIN_NS 50000 /* spin this long for a step to end, then sleep */
#define HET_SYNC_PARTS_PER_THREAD 4
#define HET_SYNC_AHEAD_CHUNK 2048 /* bytes asked for ahead between two looks at the step */

#define GATE_CLOSED  ((uint64_t)1 << 31)
#define GATE_MEMBERS (GATE_CLOSED - 1)

static inline void het_sync_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static inline unsigned work_step(uint64_t v) { return (unsigned)(v >> 32); }
static inline unsigned run_done(uint64_t v) { return (unsigned)(v >> 16) & 0xffffu; }
static inline unsigned run_next(uint64_t v) { return (unsigned)v & 0xffffu; }

void het_cpu_sync_init(struct het_cpu_sync *s)
{
    for (int r = 0; r < HET_CPU_SYNC_RUNS; r++) atomic_init(&s->run[r].next, (uint64_t)UINT32_MAX << 32); /* step -1 */
    atomic_init(&s->work, 0);
    atomic_init(&s->closed, 0);
    atomic_init(&s->epoch, 0u);
    atomic_init(&s->sleepers, 0);
    atomic_init(&s->gate, GATE_CLOSED); /* key 0: no node; node keys start at 1 */
    s->pooled = false;
}

void het_cpu_worker_init(struct het_cpu_worker *w, struct het_cpu_sync *s)
{
    w->sync = s;
    w->step = 0;
    w->waits = 0;
    w->sleeps = 0;
    w->seat = NULL;
    w->ahead = NULL;
    w->ahead_left = 0;
    w->handoff_ns = INT64_MAX;
    w->handoff_n = 0;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define CLOSED_NS_MASK (((uint64_t)1 << 48) - 1)

/* The close of `step` seen while spinning: the time since its closer
 * stamped it, if the stamp is that step's (a later close may have
 * stamped over it), kept when it is the least yet. */
static void het_sync_saw_close(struct het_cpu_worker *w, unsigned step)
{
    const uint64_t c = atomic_load_explicit(&w->sync->closed, memory_order_relaxed);
    if ((c & 0xffffu) != (step & 0xffffu)) return;
    const int64_t d = (int64_t)(((uint64_t)now_ns() - (c >> 16)) & CLOSED_NS_MASK);
    if (d > 100000) return; /* not this wait's close (a clock step, a wrap) */
    if (d < w->handoff_ns) w->handoff_ns = d;
    w->handoff_n++;
}

/* Until the step `step` is over: spin, then sleep. A pool worker is out of
 * its job meanwhile (the caller does not wait for it), and back in after;
 * if the job ended, het_cpu_seat_in does not return. */
static void het_sync_wait_step(struct het_cpu_worker *w, unsigned step)
{
    struct het_cpu_sync *s = w->sync;
    if (work_step(atomic_load_explicit(&s->work, memory_order_acquire)) != step) return;
    w->waits++;
    if (w->seat) het_cpu_seat_out(w->seat);
    int64_t t0 = 0;
    bool outlasted = true; /* the spin: then sleep */
    for (int i = 1;; i++) {
        if (work_step(atomic_load_explicit(&s->work, memory_order_acquire)) != step) {
            het_sync_saw_close(w, step);
            outlasted = false;
            break;
        }
        if (w->ahead_left) { /* memory is idle meanwhile: ask for what comes next */
            const size_t n = w->ahead_left < HET_SYNC_AHEAD_CHUNK ? w->ahead_left : HET_SYNC_AHEAD_CHUNK;
            for (size_t o = 0; o < n; o += 64) _mm_prefetch((const char *)w->ahead + o, _MM_HINT_T1);
            w->ahead += n;
            w->ahead_left -= n;
            continue;
        }
        het_sync_relax();
        if (i % 64) continue;
        const int64_t t = now_ns();
        if (!t0) t0 = t;
        else if (t - t0 > HET_SYNC_SPIN_NS) break;
    }
    for (; outlasted;) {
        const unsigned e = atomic_load(&s->epoch);
        atomic_fetch_add(&s->sleepers, 1);
        const bool open = work_step(atomic_load(&s->work)) == step;
        if (open) {
            syscall(SYS_futex, (unsigned *)&s->epoch, FUTEX_WAIT_PRIVATE, e, NULL, NULL, 0);
            w->sleeps++;
        }
        atomic_fetch_sub(&s->sleepers, 1);
        if (!open) break;
    }
    if (w->seat) het_cpu_seat_in(w->seat);
    /* the acquire that orders this thread after every part of the step */
    (void)atomic_load_explicit(&s->work, memory_order_acquire);
}

/* The runs a step of n parts is cut into (1: one shared run) and their length. */
static int sync_runs(int64_t n, int nth)
{
    const int r = nth < HET_CPU_SYNC_RUNS ? nth : HET_CPU_SYNC_RUNS;
    return r > 1 && n % r == 0 ? r : 1;
}

/* The next part of run r of the step, or -1: the run is out, or the step is
 * over (a run word tagged with a later step). */
static int64_t run_take(struct het_cpu_sync *s, int r, unsigned step, int64_t len)
{
    _Atomic uint64_t *word = &s->run[r].next;
    uint64_t v = atomic_load_explicit(word, memory_order_relaxed);
    for (;;) {
        const unsigned tag = work_step(v);
        if ((int)(tag - step) > 0) return -1;
        const uint64_t at = tag == step ? v & 0xffffffffu : 0; /* done << 16 | next; an earlier tag: untouched */
        if (run_next(at) >= (uint64_t)len) return -1;
        if (atomic_compare_exchange_weak_explicit(word, &v, (uint64_t)step << 32 | (at + 1u), memory_order_relaxed,
                                                  memory_order_relaxed))
            return (int64_t)r * len + run_next(at);
    }
}

/* The step is over when every run's parts are done (a word tagged with the
 * step, done == its length). Sequentially consistent loads: see
 * het_sync_take. */
static bool runs_done(struct het_cpu_sync *s, int runs, unsigned step, int64_t len)
{
    for (int r = 0; r < runs; r++) {
        const uint64_t v = atomic_load(&s->run[r].next);
        if (work_step(v) != step || run_done(v) < (unsigned)len) return false;
    }
    return true;
}

/* Open the step after `step` (whoever saw its parts all done first) and
 * wake the threads that sleep on it. */
static void het_sync_close(struct het_cpu_sync *s, unsigned step)
{
    uint64_t v = (uint64_t)step << 32;
    /* stamped before the close, so a waiter that sees the close sees the
     * stamp (or a later one); a losing closer's stamp is a few ns off */
    atomic_store_explicit(&s->closed, ((uint64_t)now_ns() & CLOSED_NS_MASK) << 16 | (step & 0xffffu),
                          memory_order_relaxed);
    if (!atomic_compare_exchange_strong(&s->work, &v, (uint64_t)(step + 1u) << 32)) return; /* closed already */
    atomic_fetch_add(&s->epoch, 1u);
    if (atomic_load(&s->sleepers) > 0)
        syscall(SYS_futex, (unsigned *)&s->epoch, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Count part `held` done (held >= 0), take the next part of the step if
 * one is left and `more` (its own run's first, see the file comment);
 * returns it, or n after the step is over (this thread closed it, or
 * waited for that). A part done is counted in its run's word: for a part
 * of the thread's own run, the same compare-and-swap that takes the next
 * one, on a line no other thread touches until its own run is out. The
 * increment that completes a run looks at every run; the last increment
 * of the step (all of them and these loads sequentially consistent) sees
 * them all complete, so some thread closes the step. */
static int64_t het_sync_take(struct het_cpu_worker *w, int ith, int nth, int64_t n, int64_t held, bool more)
{
    struct het_cpu_sync *s = w->sync;
    const unsigned step = w->step;
    const int runs = sync_runs(n, nth);
    const int64_t len = n / runs;
    const int own = ith % runs;
    if (held >= 0) {
        const int r = (int)(held / len);
        _Atomic uint64_t *word = &s->run[r].next;
        uint64_t v = atomic_load_explicit(word, memory_order_relaxed);
        for (;;) {
            const bool take = more && r == own && run_next(v) < (unsigned)len;
            const uint64_t nv = v + ((uint64_t)1 << 16) + (take ? 1u : 0u);
            if (!atomic_compare_exchange_weak(word, &v, nv)) continue;
            if (take) return (int64_t)r * len + run_next(v);
            if (run_done(nv) == (unsigned)len && runs_done(s, runs, step, len)) {
                het_sync_close(s, step);
                w->step = step + 1;
                return n;
            }
            break;
        }
    }
    if (more)
        for (int i = 0; i < runs; i++) {
            const int64_t k = run_take(s, (own + i) % runs, step, len);
            if (k >= 0) return k;
        }
    het_sync_wait_step(w, step);
    w->step = step + 1;
    return n;
}

/* Without a worker (the static split) thread ith takes the parts
 * part_of(ith), part_of(ith + nth), ...: when n is a multiple of nth the
 * parts form nth runs of n / nth and thread ith works through run ith, the
 * same runs the worker threads own (up to HET_CPU_SYNC_RUNS threads). part_of
 * is a permutation of [0, n). */
static int64_t part_of(int64_t k, int64_t n, int nth)
{
    if (nth <= 1 || k >= n || n % nth) return k;
    return (k % nth) * (n / nth) + k / nth;
}

static int64_t turn_of(int64_t part, int64_t n, int nth)
{
    if (nth <= 1 || n % nth) return part;
    return (part % (n / nth)) * nth + part / (n / nth);
}

int64_t het_cpu_part_first(const struct het_compute_params *p, int64_t n)
{
    if (n <= 0) return 0; /* no step: every thread agrees there is nothing to do */
    if (p->worker) return het_sync_take(p->worker, p->ith, p->nth, n, -1, true);
    if (p->ith < n) return part_of(p->ith, n, p->nth);
    if (p->nth > 1) {
#pragma omp barrier
    }
    return n;
}

int64_t het_cpu_part_next(const struct het_compute_params *p, int64_t n, int64_t part)
{
    if (p->worker) return het_sync_take(p->worker, p->ith, p->nth, n, part, true);
    const int64_t k = turn_of(part, n, p->nth) + p->nth;
    if (k < n) return part_of(k, n, p->nth);
    if (p->nth > 1) {
#pragma omp barrier
    }
    return n;
}

bool het_cpu_node_enter(const struct het_compute_params *p, unsigned key)
{
    if (!p->worker || !p->worker->sync->pooled) return true;
    struct het_cpu_sync *s = p->worker->sync;
    const bool caller = !p->worker->seat;
    uint64_t g = atomic_load(&s->gate);
    for (;;) {
        const unsigned at = (unsigned)(g >> 32);
        uint64_t ng;
        if (at == key) {
            if (caller) return true; /* counted already */
            if (g & GATE_CLOSED) return false;
            ng = g + 1;
        } else if ((int)(key - at) > 0) {
            ng = (uint64_t)key << 32 | (caller ? 0u : 1u); /* the first here opens the node */
        } else {
            return caller; /* the node is over (never so for the caller, who is always counted) */
        }
        if (atomic_compare_exchange_weak(&s->gate, &g, ng)) return true;
    }
}

void het_cpu_sync_all(const struct het_compute_params *p)
{
    if (p->nth <= 1) return;
    if (!p->worker) {
#pragma omp barrier
        return;
    }
    /* a step of one part per thread, each taking one: over once all arrived;
     * OpenMP: every thread of the team; a pool job: the caller and the
     * workers that entered the node, fixed by the first to arrive closing it */
    int64_t n = p->nth;
    if (p->worker->sync->pooled) {
        struct het_cpu_sync *s = p->worker->sync;
        uint64_t g = atomic_load(&s->gate);
        while (!(g & GATE_CLOSED) && !atomic_compare_exchange_weak(&s->gate, &g, g | GATE_CLOSED)) {}
        n = (int64_t)(g & GATE_MEMBERS) + 1;
    }
    const int64_t k = het_sync_take(p->worker, p->ith, p->nth, n, -1, true);
    if (k < n) het_sync_take(p->worker, p->ith, p->nth, n, k, false);
}

int64_t het_cpu_n_parts(const struct het_compute_params *p, int64_t units, int64_t min_units)
{
    if (units <= 0) return 0;
    if (p->nth <= 1) return 1;
    if (min_units < 1) min_units = 1;
    int64_t n = units / min_units;
    const int64_t cap = (int64_t)p->nth * HET_SYNC_PARTS_PER_THREAD;
    if (n > cap) n = cap;
    if (n > units) n = units;
    if (n > HET_CPU_PARTS_MAX) n = HET_CPU_PARTS_MAX;
    if (n > p->nth) n -= n % p->nth; /* runs of adjacent parts, one per thread (part_of) */
    return n < 1 ? 1 : n;
}
