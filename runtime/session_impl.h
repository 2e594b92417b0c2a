/*
 * session_impl.h — the session object (het/session.h) as session.c,
 * budget.c and sensitivity.c share it.
 */
#ifndef HET_RUNTIME_SESSION_IMPL_H
#define HET_RUNTIME_SESSION_IMPL_H

#include "het/plan.h"
#include "het/session.h"

#define HET_SESSION_MAX_DEVICES 4

struct het_session {
    struct het_session_params p;
    het_model   *model;
    het_device  *devices[HET_SESSION_MAX_DEVICES];
    int          n_devices;
    het_profile *profiles[HET_SESSION_MAX_DEVICES]; /* NULL with one device */
    het_pool    *pool;
    het_sched   *sched;
    het_context *ctx;
    struct het_plan_pin pins[HET_SCHED_MAX_PINS];
    struct het_session_budget *budget;            /* NULL: none asked for */
    struct het_plan_accuracy   budget_pa;         /* what the scheduler plans with */
    struct het_device_stats    stats_base[HET_SESSION_MAX_DEVICES];
    bool         save_learned;  /* store what the scheduler learned at close (online, cached profiles) */
};

/* Steps 1-5 of het_session_open (model, devices, pool, profiles,
 * scheduler, prepared weights): no budget, no context. The CPU-alone
 * reference of a sensitivity measurement is opened this way, so measuring
 * never recurses into another budget. */
het_session *het_session_open_core(const struct het_session_params *p, het_error *err);

/* budget.c: step 6, the accuracy budget */
enum het_status het_session_budget_open(het_session *s, het_error *err);

/* Notices to the session's log callback. */
void het_session_log(const het_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* HET_RUNTIME_SESSION_IMPL_H */
