/*
 * policies.c — the table of placement policies (het_policies[], after
 * StarPU's predefined_policies[]) and the one parser of their names:
 * "NAME", or "NAME:DEV" for a policy that takes a device. A new policy is a
 * file with one struct het_policy and a line here.
 */
#include "het/plan.h"

#include <stdio.h>
#include <string.h>

const struct het_policy *const het_policies[] = {
    &het_policy_fastest,
    &het_policy_first,
    &het_policy_single,
    &het_policy_alternate,
    NULL,
};

const struct het_policy *het_policy_find(const char *name)
{
    for (int i = 0; het_policies[i]; i++)
        if (!strcmp(het_policies[i]->name, name)) return het_policies[i];
    return NULL;
}

static void list_names(char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; het_policies[i] && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s%s", i ? ", " : "", het_policies[i]->name,
                                het_policies[i]->takes_device ? ":DEV" : "");
}

/* DEV is a device name or a prefix of one ("vulkan" matches "vulkan0") */
static int find_device(const char *dev, const char *const *names, int n)
{
    for (int d = 0; d < n; d++)
        if (!strcmp(names[d], dev)) return d;
    for (int d = 0; d < n; d++)
        if (*dev && !strncmp(names[d], dev, strlen(dev))) return d;
    return -1;
}

enum het_status het_policy_from_name(const char *spec, const char *const *dev_names, int n_devices,
                                 const struct het_policy **policy, int *device, het_error *err)
{
    char name[32], names[128];
    const char *colon = spec ? strchr(spec, ':') : NULL;
    *policy = &het_policy_fastest;
    *device = -1;
    if (!spec || !*spec) return HET_OK;
    size_t len = colon ? (size_t)(colon - spec) : strlen(spec);
    snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), spec);
    const struct het_policy *p = len < sizeof name ? het_policy_find(name) : NULL;
    list_names(names, sizeof names);
    if (!p) return het_error_set(err, HET_ERR_INVALID, "unknown policy '%s' (%s)", spec, names);
    if (p->takes_device && !colon)
        return het_error_set(err, HET_ERR_INVALID, "policy '%s' needs a device: %s:DEV", spec, p->name);
    if (!p->takes_device && colon)
        return het_error_set(err, HET_ERR_INVALID, "policy '%s' takes no device (%s)", spec, names);
    if (colon) {
        *device = find_device(colon + 1, dev_names, n_devices);
        if (*device < 0) return het_error_set(err, HET_ERR_INVALID, "'%s': no such device in the set", spec);
    }
    *policy = p;
    return HET_OK;
}
