/*
 * hr_accuracy.h — the accuracy side of `hetrun plan`: the text evaluated
 * (-p/-f, else a built-in reference continuation), the CPU-alone reference
 * run, the comparison with the plan's placement per position, and the
 * sensitivity table the accuracy budget is spent with (a --sensitivity
 * file, the cached measurement, a measurement made now, or an estimate).
 * The session of every other command uses the same table (hr_budget.c).
 */
#ifndef HR_ACCURACY_H
#define HR_ACCURACY_H

#include <stdbool.h>
#include <stdint.h>

#include "het/accuracy.h"
#include "het/plan.h"
#include "tools/hetrun.h"

struct hr_accuracy {
    const struct hr_opts *o;
    het_model  *model;            /* the plan's model (not owned)                 */
    int32_t    *tokens;           /* the text, BOS included                       */
    int32_t     n, n_vocab;
    int32_t     chunk;            /* tokens per eval: 1 decode, the batch for prefill */
    float      *ref;              /* n x n_vocab, the CPU alone, in the eval's mode */
    bool        have_ref;
    float      *test;             /* n x n_vocab, the plan                        */
    double     *kl;               /* per position                                  */
    int32_t    *top;              /* per position: cpu top-1, plan top-1          */
    struct het_accuracy res;
    bool        evaluated;
    double      budget;           /* NAN: none                                     */
    struct het_sensitivity sens;
    char        sens_source[4200];/* where the table came from                     */
    struct het_plan_accuracy pa;  /* what the planner gets                         */
};

/* Tokenize the text and parse the budget; chunk: tokens per eval (1 for
 * decode plans, the planned batch for prefill). */
bool hr_accuracy_open(struct hr_accuracy *a, const struct hr_opts *o, const struct hr_plan_opts *po, het_model *m,
                      int32_t chunk);
void hr_accuracy_close(struct hr_accuracy *a);

/* The devices the sensitivity is measured on (a real device set). */
struct hr_acc_devices {
    het_device *const        *devices;
    const het_profile *const *profiles;
    int                       n;
    int                       lossy;   /* index of the lossy device, -1 none   */
    int                       exact;   /* index of an exact device, -1 none    */
    het_sched                *sched;   /* for supports queries                 */
};

/* Fill a->sens and a->pa for graph g: --sensitivity FILE, --sensitivity
 * measure (each class of nodes the lossy device runs, alone on it; stored
 * in the cache; one line on stderr says how long it took), --sensitivity
 * estimate (HET_PLAN_DEFAULT_NODE_KL per node); without the flag the
 * cached table, else, with a budget to spend, a measurement now, else the
 * estimate. */
bool hr_accuracy_sensitivity(struct hr_accuracy *a, const struct hr_plan_opts *po, const het_graph *g,
                             const struct hr_acc_devices *d);

/* Evaluate the text on sched (a context of its own) and compare with the CPU alone. */
bool hr_accuracy_eval(struct hr_accuracy *a, het_sched *sched);

void hr_accuracy_print(const struct hr_accuracy *a, const struct het_plan *plan);
/* ,"accuracy":{...} (leading comma included) */
void hr_accuracy_json(const struct hr_accuracy *a, const struct het_plan *plan);

#endif /* HR_ACCURACY_H */
