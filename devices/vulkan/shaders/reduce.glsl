// reduce.glsl — workgroup-wide sum and max, every invocation gets the result.
// Must be called in uniform control flow. With USE_SUBGROUP (the *_sg.comp
// builds, chosen when the device reports subgroup arithmetic for compute)
// each subgroup reduces in registers and one value per subgroup meets in
// shared memory; otherwise a shared-memory tree (WG is a power of two).
// With ONE_SUBGROUP as well (the workgroup is exactly one subgroup) the
// subgroup's result is the answer: no shared memory, no barrier.

shared float red_sh[WG];

float wg_sum(float v)
{
#if defined(USE_SUBGROUP) && defined(ONE_SUBGROUP)
    return subgroupAdd(v);
#elif defined(USE_SUBGROUP)
    v = subgroupAdd(v);
    if (subgroupElect()) red_sh[gl_SubgroupID] = v;
    barrier();
    float r = 0.0;
    for (uint i = 0; i < gl_NumSubgroups; i++) r += red_sh[i];
    barrier();
    return r;
#else
    uint t = gl_LocalInvocationID.x;
    red_sh[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red_sh[t] += red_sh[t + s];
        barrier();
    }
    float r = red_sh[0];
    barrier();
    return r;
#endif
}

float wg_max(float v)
{
#if defined(USE_SUBGROUP) && defined(ONE_SUBGROUP)
    return subgroupMax(v);
#elif defined(USE_SUBGROUP)
    v = subgroupMax(v);
    if (subgroupElect()) red_sh[gl_SubgroupID] = v;
    barrier();
    float r = red_sh[0];
    for (uint i = 1; i < gl_NumSubgroups; i++) r = max(r, red_sh[i]);
    barrier();
    return r;
#else
    uint t = gl_LocalInvocationID.x;
    red_sh[t] = v;
    barrier();
    for (uint s = WG / 2; s > 0; s >>= 1) {
        if (t < s) red_sh[t] = max(red_sh[t], red_sh[t + s]);
        barrier();
    }
    float r = red_sh[0];
    barrier();
    return r;
#endif
}
