/*
 * policy_single.c — everything on one named device ("single:DEV"); a node
 * it cannot run goes elsewhere as a logged, counted fallback.
 */
#include "het/plan.h"

static int single_wanted(const struct het_policy_ctx *c) { return c->device; }

const struct het_policy het_policy_single = {
    .name = "single",
    .description = "everything on one device (single:DEV); others only by counted fallback",
    .wanted = single_wanted,
    .takes_device = true,
    .honours_budget = true, /* unless DEV itself is lossy: then the user asked for it */
};
