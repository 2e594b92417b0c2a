/*
 * contention.h — did other work on the machine disturb a timed region?
 * (internal; sched/contention.c). Calibration and the scheduler's probes
 * take a snapshot before and after each timed run and drop the runs that
 * other processes delayed: time only ever gets added by them, so such a
 * run measures the machine, not the work.
 */
#ifndef HET_SCHED_CONTENTION_H
#define HET_SCHED_CONTENTION_H

#include <stdbool.h>

struct het_contention {
    double wait_us;   /* summed run-queue wait of the process's threads (-1: not available) */
    long   slices;    /* times the process's threads were put on a core                      */
    long   preempted; /* involuntary context switches of the process                         */
};

/* The process's counters now. */
void het_contention_now(struct het_contention *c);
/* Was a run of wall_us between a and b disturbed: its threads waited for a
 * core for more than a twentieth of it (plus 20 µs of slack) beyond what
 * waking them up costs (WAKE_US per time slice), or, where the kernel does
 * not report waits, one of them was preempted? */
bool het_contention_disturbed(const struct het_contention *a, const struct het_contention *b, double wall_us);

#endif /* HET_SCHED_CONTENTION_H */
