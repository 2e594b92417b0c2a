/*
 * cache.h — the per-user folder where measurements are kept between runs
 * ($XDG_CACHE_HOME/het/profiles, else ~/.cache/het/profiles): device
 * profiles (profile_json.c) and sensitivity tables (sensitivity.c), and the
 * hash that keys their file names. Internal to policy/.
 */
#ifndef HET_POLICY_CACHE_H
#define HET_POLICY_CACHE_H
#include "het/status.h"

#include <stddef.h>
#include <stdint.h>

/* FNV-1a of s folded into h, then a field separator, so that ("ab","c")
 * and ("a","bc") hash apart. Start from HET_CACHE_HASH_SEED. */
#define HET_CACHE_HASH_SEED 0xcbf29ce484222325ull
uint64_t het_cache_hash(uint64_t h, const char *s);

/* The folder's path into buf; `what` names the caller in errors
 * ("profile cache", "sensitivity cache"). */
enum het_status het_cache_dir(char *buf, size_t size, const char *what, het_error *err);

/* Create the folder and its parents (existing ones are fine). */
enum het_status het_cache_mkdir(const char *path, const char *what, het_error *err);
#endif /* HET_POLICY_CACHE_H */
