/*
 * cache.c — the cache folder and file-name hash shared by device profiles
 * and sensitivity tables (see cache.h).
 */
#include "policy/cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

uint64_t het_cache_hash(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xff) * 0x100000001b3ull; /* field separator */
}

enum het_status het_cache_dir(char *buf, size_t size, const char *what, het_error *err)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && *xdg) n = snprintf(buf, size, "%s/het/profiles", xdg);
    else if (home && *home) n = snprintf(buf, size, "%s/.cache/het/profiles", home);
    else return het_error_set(err, HET_ERR_IO, "%s: neither XDG_CACHE_HOME nor HOME is set", what);
    if (n < 0 || (size_t)n >= size) return het_error_set(err, HET_ERR_INVALID, "%s: path too long", what);
    return HET_OK;
}

enum het_status het_cache_mkdir(const char *path, const char *what, het_error *err)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST)
            return het_error_set(err, HET_ERR_IO, "%s: mkdir %s: %s", what, tmp, strerror(errno));
        if (!c) return HET_OK;
        *p = c;
    }
}
