/*
 * status.h — error reporting for every fallible het call.
 *
 * Library functions never print and never exit: they return an
 * enum het_status and, when the caller passes a het_error, fill it with one
 * line that names what failed and where (file offset, field, flag, device).
 */
#ifndef HET_STATUS_H
#define HET_STATUS_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

enum het_status {
    HET_OK                  =  0,
    HET_ERR_INVALID         = -1, /* bad argument or bad input data            */
    HET_ERR_NOMEM           = -2, /* allocation failed                         */
    HET_ERR_IO              = -3, /* open/read/write/mmap failed               */
    HET_ERR_FORMAT          = -4, /* malformed file (GGUF, JSON, manifest)     */
    HET_ERR_UNSUPPORTED     = -5, /* valid but not implemented here            */
    HET_ERR_DEVICE          = -6, /* a device call failed                      */
    HET_ERR_TIMEOUT         = -7, /* a device did not answer in time           */
    HET_ERR_DEVICE_LOST     = -8, /* the device is gone; re-plan without it    */
    HET_ERR_NO_DEVICE       = -9, /* no device of the requested kind exists    */
};

/* One error record. msg is a single line without a trailing newline. */
typedef struct het_error {
    enum het_status status;
    char            msg[512];
} het_error;

/* Fill err (which may be NULL) and return st, so callers can write
 *     return het_error_set(err, HET_ERR_FORMAT, "gguf: ...", ...);         */
enum het_status het_error_set(het_error *err, enum het_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum het_status het_error_setv(het_error *err, enum het_status st, const char *fmt, va_list ap);

/* Prefix an existing message: "ctx: old message". err may be NULL. */
void het_error_prefix(het_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *het_status_name(enum het_status st);

#ifdef __cplusplus
}
#endif
#endif /* HET_STATUS_H */
