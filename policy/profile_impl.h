/*
 * profile_impl.h — the insides of het_profile, shared by the object code
 * (profile.c), its JSON form (profile_json.c) and the fitter (fit.c).
 * Internal to policy/.
 */
#ifndef HET_PROFILE_IMPL_H
#define HET_PROFILE_IMPL_H

#include "het/profile.h"

struct het_profile_model {
    enum het_op_class          cls;
    enum het_type              wtype;
    bool                       has_fit;
    struct het_cost_fit        fit;
    struct het_profile_sample *samples;     /* kept so the fit can be checked and redone */
    int                        n_samples, cap_samples;
};

/* One history model (policy/history.c): ratios observed / fitted prediction. */
struct het_history_entry {
    enum het_op_class cls;
    enum het_type     wtype;
    int               m_bucket;               /* rows in (2^(b-1), 2^b]               */
    int               size_bucket;            /* floor(log4(max(bytes, flops/8)))      */
    int               n_obs;                  /* every observation ever made           */
    int               n_ring, next;           /* the last HET_HISTORY_RING of them     */
    double            ratio[HET_HISTORY_RING];
    double            applied;                /* the ratio predictions use; NAN: none  */
    uint64_t          serial;                 /* p->n_observed at its last observation */
};

struct het_profile {
    char                 name[32];          /* device name ("cpu", "vulkan0")         */
    char                 desc[256];         /* device description (driver, threads)   */
    char                 het_version[32];   /* HET_VERSION it was made with            */
    char                 label[256];        /* "measured ..." / "unmeasured default"  */
    enum het_device_kind kind;
    bool                 emulated;
    bool                 measured;
    struct het_profile_device_costs dc;
    struct het_profile_model *models;
    int                  n_models, cap_models;
    int16_t              index[HET_OPCLASS_COUNT][HET_TYPE_COUNT]; /* -> models, -1: none */
    struct het_handoff  *handoffs;
    int                  n_handoffs, cap_handoffs;
    struct het_history_entry *hist;         /* learned while used (history.c)          */
    int                  n_hist, cap_hist;
    uint64_t             generation;        /* bumped when an applied ratio moves      */
    uint64_t             n_observed;        /* observations ever recorded              */
    uint64_t             n_new_obs;         /* of which since it was made or loaded    */
    char                 noisy[256];        /* why calibration distrusts it ("": clean) */
};

struct het_profile_model *het_profile_model_get(const het_profile *p, enum het_op_class cls, enum het_type wtype);

/* Roofline prediction without the learned correction (profile.c). */
double het_profile_predict_roofline_base(const het_profile *p, const struct het_op_cost *c);
/* The history entry of a bucket, made empty when missing (history.c); NULL on out of memory. */
struct het_history_entry *het_profile_history_add(het_profile *p, enum het_op_class cls, enum het_type wt, int mb,
                                                  int sb, het_error *err);

/* Remove sample i of (cls, wtype) (calibration's outliers); false when there is none. */
bool het_profile_drop_sample(het_profile *p, enum het_op_class cls, enum het_type wtype, int i);

/* Fit one model to its samples (fit.c). false with fewer than 2 samples. */
bool het_cost_fit_samples(const struct het_profile_sample *s, int n, struct het_cost_fit *out);

#endif /* HET_PROFILE_IMPL_H */
