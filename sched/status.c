/*
 * status.c — het_error helpers: one-line error messages with context.
 */
#include "het/status.h"

#include <stdio.h>
#include <string.h>

enum het_status het_error_setv(het_error *err, enum het_status st, const char *fmt, va_list ap)
{
    if (err) {
        err->status = st;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        /* keep it one line */
        for (char *c = err->msg; *c; c++)
            if (*c == '\n' || *c == '\r') *c = ' ';
    }
    return st;
}

enum het_status het_error_set(het_error *err, enum het_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    het_error_setv(err, st, fmt, ap);
    va_end(ap);
    return st;
}

void het_error_prefix(het_error *err, const char *fmt, ...)
{
    if (!err) return;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(prefix);
    if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
    memcpy(err->msg, prefix, n);
    err->msg[n] = ':';
    err->msg[n + 1] = ' ';
    size_t rest = sizeof err->msg - n - 2;
    memcpy(err->msg + n + 2, old, rest - 1);
    err->msg[sizeof err->msg - 1] = 0;
}

const char *het_status_name(enum het_status st)
{
    switch (st) {
    case HET_OK:              return "ok";
    case HET_ERR_INVALID:     return "invalid argument";
    case HET_ERR_NOMEM:       return "out of memory";
    case HET_ERR_IO:          return "i/o error";
    case HET_ERR_FORMAT:      return "malformed input";
    case HET_ERR_UNSUPPORTED: return "unsupported";
    case HET_ERR_DEVICE:      return "device error";
    case HET_ERR_TIMEOUT:     return "device timeout";
    case HET_ERR_DEVICE_LOST: return "device lost";
    case HET_ERR_NO_DEVICE:   return "no such device";
    }
    return "unknown status";
}
