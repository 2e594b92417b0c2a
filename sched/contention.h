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

/* Whether the machine was busy over a longer span (a calibration's
 * disturbed points): the CPU time all processes used on the CPUs this
 * process may run on (/proc/stat) less this process's own. The counters
 * above cannot tell a wait for a core that other work held from one that a
 * sibling thread held: a CPU-type Vulkan driver (lavapipe) runs its own
 * threads on the CPU's cores, and a wake-up in a VM waits for the host. */
struct het_machine_load {
    double busy_us;   /* CPU time used on those CPUs, by every process (-1: not available) */
    double own_us;    /* this process's CPU time (-1: not available)                       */
    double wall_us;
    int    n_cpu;     /* the CPUs counted                                                  */
};

/* The counters now. */
void het_machine_load_now(struct het_machine_load *m);
/* CPU time other processes used between a and b (*other_us) and what the
 * CPUs had to give (*capacity_us: CPUs x wall time); false when unknown. */
bool het_machine_load_other(const struct het_machine_load *a, const struct het_machine_load *b, double *other_us,
                            double *capacity_us);

#endif /* HET_SCHED_CONTENTION_H */
