/*
 * cpu_stream.h — the hint decode's weight stream asks ahead with, chosen
 * by racing the hints against each other on the device's own splits
 * (cpu_stream.c).
 */
#ifndef HET_CPU_STREAM_H
#define HET_CPU_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/cpu/cpu_ops.h"
#include "het/status.h"

/* auto: raced; nta, t0, t1: fixed (HET_CPU_STREAM) */
enum het_cpu_stream_mode { HET_CPU_STREAM_AUTO, HET_CPU_STREAM_FIXED };

/* The race. A round runs each hint still in it on two splits, in the
 * order best, others, others reversed, best (the first round of a race on
 * one each: best, others, and the second round soon after); the least
 * time per streamed byte of each hint's splits decides the best, and a hint
 * slower than that by more than the drop margin (wider in the first round)
 * sits out the next rounds. */
struct het_cpu_stream_race {
    enum het_cpu_stream best;                       /* what splits run with between rounds   */
    bool                in[HET_CPU_STREAM_COUNT];   /* racing in the next round              */
    enum het_cpu_stream order[HET_CPU_STREAM_COUNT]; /* this round's hints, best first       */
    int                 n_order;
    int                 reps;                       /* splits each hint runs in it (1 or 2)    */
    int                 at;                         /* the next split's place in it (-1: none) */
    double              least[HET_CPU_STREAM_COUNT]; /* this round's ns per streamed MB      */
    uint64_t            like;                       /* which splits it times (0: not yet)    */
    int                 strays;                     /* timed splits since not like them      */
    uint32_t            since;                      /* timed splits since the last round,    */
    uint32_t            wait;                       /* and how many the next one waits for   */
    uint32_t            rounds;                     /* rounds begun (with or without a race) */
};

struct het_cpu_stream_choice {
    enum het_cpu_stream_mode   mode;
    enum het_cpu_stream        hint;       /* for the next split                          */
    double                     handoff_ns; /* the threads' hand-off, median of the last three
                                              splits' (0: none yet)                       */
    int64_t                    last[3];    /* the last three splits' measures, ns,       */
    int                        n_last;     /* how many of them there are (<= 3),         */
    int                        at;         /* and where the next goes                    */
    uint64_t                   splits[HET_CPU_STREAM_COUNT]; /* decode splits run with each */
    uint64_t                   races;      /* rounds begun that race two hints or more    */
    struct het_cpu_stream_race race;
};

/* The choice as HET_CPU_STREAM says (env: its value, NULL or "" for auto):
 * "auto", "nta", "t0" or "t1"; anything else is an error naming the value. */
enum het_status het_cpu_stream_init(struct het_cpu_stream_choice *s, const char *env, het_error *err);
/* A split ran with s->hint for split_ns, streaming stream_bytes of decode
 * weights (0: none, or a probe's); splits of equal `like` (nonzero) are
 * alike enough to race the hints on (the caller's: the same weights, as
 * many rows); its caller saw n step closes while spinning (0: it ran
 * alone), the quickest min_ns after its closer stamped it. Chooses the hint
 * for the next split. */
void het_cpu_stream_update(struct het_cpu_stream_choice *s, int64_t min_ns, int n, double split_ns,
                           double stream_bytes, uint64_t like);
const char *het_cpu_stream_name(enum het_cpu_stream hint);
/* The least close-to-seen time, ns, from which the threads count as far
 * apart (two last-level caches). */
double het_cpu_stream_far_ns(void);
/* Timed splits the race runs with its best hint between two rounds (after
 * the first: het_cpu_stream_second_after), and the least streamed bytes
 * that make a split's time count. */
int    het_cpu_stream_round_every(void);
int    het_cpu_stream_second_after(void);
double het_cpu_stream_min_bytes(void);

#endif /* HET_CPU_STREAM_H */
