/*
 * policy_fastest.c — the default placement policy: no node wants a device;
 * the planner places every node where the predicted time of the whole graph
 * (nodes, splits, hand-offs, kernel switches) is least.
 */
#include "het/plan.h"

static int fastest_wanted(const struct het_policy_ctx *c)
{
    (void)c;
    return -1;
}

const struct het_policy het_policy_fastest = {
    .name = "fastest",
    .description = "minimise the predicted time from the devices' profiles (the default)",
    .wanted = fastest_wanted,
    .honours_budget = true,
};
