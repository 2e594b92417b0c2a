/*
 * cpu_sync.c — the barrier the CPU device's threads meet at between nodes
 * (and inside kernels with phases, through het_cpu_barrier).
 *
 * Why not "omp barrier": libgomp spins for a long time before it sleeps.
 * That suits an idle machine, but when other processes compete for the
 * cores a waiting thread burns the time slice its partner needs, and a
 * decode step (hundreds of barriers) slows down by an order of magnitude.
 * This barrier spins briefly (~7 us: most waits between nodes on an idle
 * machine are shorter), then yields the core (~60 us more when nobody else
 * wants it), then sleeps on a futex until the last thread arrives.
 *
 * Sense by phase counter: a thread reads the phase before it arrives; the
 * last to arrive resets the count, advances the phase and wakes sleepers.
 * The sleeper count and the phase are both sequentially consistent, so
 * either the last thread sees a sleeper or the sleeper sees the new phase
 * (and FUTEX_WAIT itself refuses to sleep once the phase has moved on).
 */
#include "devices/cpu/cpu_ops.h"

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HET_SYNC_SPIN   256 /* pause instructions first (~7 us)     */
#define HET_SYNC_YIELDS 64  /* then sched_yield()s (~60 us if idle) */

static inline void het_sync_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void het_cpu_sync_init(struct het_cpu_sync *s, int nth)
{
    atomic_init(&s->arrived, 0);
    atomic_init(&s->phase, 0u);
    atomic_init(&s->sleepers, 0);
    s->nth = nth;
}

static void het_sync_sleep(struct het_cpu_sync *s, unsigned ph)
{
    atomic_fetch_add(&s->sleepers, 1);
    if (atomic_load(&s->phase) == ph)
        syscall(SYS_futex, (unsigned *)&s->phase, FUTEX_WAIT_PRIVATE, ph, NULL, NULL, 0);
    atomic_fetch_sub(&s->sleepers, 1);
}

void het_cpu_sync_wait(struct het_cpu_sync *s)
{
    const unsigned ph = atomic_load_explicit(&s->phase, memory_order_acquire);
    if (atomic_fetch_add_explicit(&s->arrived, 1, memory_order_acq_rel) == s->nth - 1) {
        atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
        atomic_fetch_add(&s->phase, 1u);
        if (atomic_load(&s->sleepers) > 0)
            syscall(SYS_futex, (unsigned *)&s->phase, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
        return;
    }
    for (int i = 0; atomic_load_explicit(&s->phase, memory_order_acquire) == ph; i++) {
        if (i < HET_SYNC_SPIN) het_sync_relax();
        else if (i < HET_SYNC_SPIN + HET_SYNC_YIELDS) sched_yield();
        else het_sync_sleep(s, ph);
    }
}
