/*
 * policy_alternate.c — change device at every node, round robin over the
 * devices still enabled: every producer hands off to another device, which
 * exercises the hand-offs (a testing policy; it ignores the accuracy budget).
 */
#include "het/plan.h"

static int alternate_wanted(const struct het_policy_ctx *c)
{
    int want = c->prev < 0 ? 0 : (c->prev + 1) % c->n_devices;
    for (int k = 0; k < c->n_devices && c->disabled && c->disabled[want]; k++) want = (want + 1) % c->n_devices;
    return want;
}

const struct het_policy het_policy_alternate = {
    .name = "alternate",
    .description = "change device at every split (exercises the hand-offs)",
    .wanted = alternate_wanted,
    .sequential = true,
    .honours_budget = false,
};
