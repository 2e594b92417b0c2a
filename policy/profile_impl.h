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
};

struct het_profile_model *het_profile_model_get(const het_profile *p, enum het_op_class cls, enum het_type wtype);

/* Fit one model to its samples (fit.c). false with fewer than 2 samples. */
bool het_cost_fit_samples(const struct het_profile_sample *s, int n, struct het_cost_fit *out);

#endif /* HET_PROFILE_IMPL_H */
