/*
 * microbench.h — running small graphs on one device the way the scheduler
 * does (register memory, prepare weights, run_split + sync), and timing
 * them robustly. Used by calibration (calibrate.c). Internal to policy/.
 */
#ifndef HET_MICROBENCH_H
#define HET_MICROBENCH_H

#include "het/profile.h"
#include "sched/device_impl.h"

/* One graph with its memory: weights (leaves flagged WEIGHT) in one
 * registered region, everything else (inputs, state, node outputs) in another. */
struct het_mbench {
    het_graph *g;
    void      *wmem, *amem;       /* page-aligned regions                   */
    size_t     wsize, asize;
    het_device *reg[2];           /* devices the regions are registered with */
    int        n_reg;
};

/* Robust timing of one repeated measurement. */
struct het_mbench_timing {
    int    min_reps, max_reps;    /* repetitions kept (after one warm-up)   */
    double target_spread;         /* stop when (p75 - p25) / median is below */
    double budget_us;             /* stop after this long (once min_reps)   */
    bool   all_disturbed;         /* (testing) count every repetition disturbed */
};

/* What a timing rests on. */
struct het_mbench_result {
    double us;          /* mean of the fastest quarter of the undisturbed repetitions    */
    double spread;      /* (p75 - p25) / median of those                                 */
    int    n_reps;      /* repetitions run (after the warm-up)                           */
    int    n_disturbed; /* of which other work on the machine delayed (sched/contention.c) */
    bool   contended;   /* fewer than min_reps undisturbed: us is then over every repetition */
    double warmup_us;   /* the untimed first run                                          */
};

/* Give every storage-owning tensor of mb->g memory, fill leaves with valid
 * random data (quantised weights are real blocks), register both regions
 * with the devices and prepare the weights. */
enum het_status het_mbench_alloc(struct het_mbench *mb, het_device *const *devs, int n_devs, het_error *err);
/* Unregister the regions from the devices (het_mbench_free does it too). */
void            het_mbench_unregister(struct het_mbench *mb);
/* Unregister, free memory and the graph. */
void            het_mbench_free(struct het_mbench *mb);

/* Time `run` (one split of nodes [first, first+n) then sync): repeated
 * until min_reps undisturbed repetitions agree within target_spread, or
 * max_reps or the budget (twice over while too few were undisturbed). */
enum het_status het_mbench_time_split(het_device *dev, struct het_mbench *mb, int first, int n,
                                      const struct het_mbench_timing *t, struct het_mbench_result *out,
                                      het_error *err);
/* The same for a hand-off: nodes [0, na) on a, synced, then [na, na+nb) on b, synced. */
enum het_status het_mbench_time_handoff(het_device *a, het_device *b, struct het_mbench *mb, int na, int nb,
                                        const struct het_mbench_timing *t, struct het_mbench_result *out,
                                        het_error *err);

/* Whether a calibration's samples are too noisy to cache: more than a
 * tenth of them (n_all) still disturbed (n_noisy) or dropped off their
 * neighbours' trend (n_outliers). The disturbed ones count only where other
 * processes used at least HET_BUSY_SHARE of the CPUs while they were
 * measured (busy_share; < 0: not known, and they count): on a quiet machine
 * the waits were the device's own threads' (lavapipe's, on the CPU's cores)
 * or wake-ups', and what was measured is what runs will see. (calibrate.c) */
#define HET_BUSY_SHARE 0.10
bool het_calibrate_too_noisy(int n_noisy, int n_outliers, int n_all, double busy_share);

#endif /* HET_MICROBENCH_H */
