/*
 * policy_first.c — each node on the first device, in the set's order, that
 * can run it (a priority list: --devices vulkan,cpu prefers Vulkan).
 */
#include "het/plan.h"

#include <math.h>

static int first_wanted(const struct het_policy_ctx *c)
{
    for (int d = 0; d < c->n_devices; d++)
        if (!isnan(c->cost[d])) return d;
    return -1;
}

const struct het_policy het_policy_first = {
    .name = "first",
    .description = "each node on the first device (in set order) that can run it",
    .wanted = first_wanted,
    .honours_budget = true,
};
