/*
 * npu_cache.c — the on-disk cache of repacked weights,
 * $XDG_CACHE_HOME/het/npu/<model key>.hnpu, so a model is repacked once, and
 * the mapping that non-resident weights are streamed from (page cache,
 * evictable, never pinned).
 *
 * File: a header (magic "HETNPUW1", file format, layout version, model key,
 * entry count and size, file size, hash of header + entries), fixed-size
 * entries (tensor name, source type, shape, sampled source fingerprint,
 * layout format/flags/zero point, data offset, size and hash), then each
 * tensor's bytes at a 4096-aligned offset. Everything is validated before
 * use — magic, versions, key, sizes, bounds, alignment, hashes — and a file
 * that fails any check is ignored (and later rewritten), never trusted. It is
 * written to a temporary name and renamed into place.
 */
#include "devices/npu/npu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define CACHE_MAGIC   "HETNPUW1"
#define CACHE_FORMAT  1u
#define CACHE_ALIGN   4096u
#define CACHE_MAX_ENTRIES 100000u

struct cache_header {
    char     magic[8];
    uint32_t format;
    uint32_t layout;
    uint64_t key;
    uint32_t n_entries;
    uint32_t entry_size;
    uint64_t file_size;
    uint64_t hdr_hash;     /* of header (this field zero) + entries */
};

struct cache_entry {
    char     name[HET_MAX_NAME];
    uint32_t src_type, fmt, flags;
    uint16_t zp;
    uint16_t pad;
    int64_t  ne[4];
    uint64_t src_fp;
    uint64_t data_off, data_bytes, data_hash;
};

_Static_assert(sizeof(struct cache_header) == 48, "cache header layout");
_Static_assert(sizeof(struct cache_entry) == 144, "cache entry layout");

struct npu_cache_file {
    uint8_t                  *map;
    size_t                    size;
    const struct cache_entry *entries;
    uint32_t                  n;
};

/* ---- hash ------------------------------------------------------------------- */

static uint64_t rotl64(uint64_t v, int r) { return (v << r) | (v >> (64 - r)); }

static uint64_t mix64(uint64_t h)
{
    h ^= h >> 31;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 29;
    h *= 0xA0761D6478BD642Full;
    h ^= h >> 32;
    return h;
}

/* Four independent lanes over 32-byte steps, folded and mixed at the end:
 * fast enough to hash a model's weights at memory speed; not cryptographic. */
uint64_t npu_hash64(const void *p, size_t n, uint64_t seed)
{
    const uint64_t k1 = 0x9E3779B97F4A7C15ull, k2 = 0xC2B2AE3D27D4EB4Full;
    uint64_t h[4] = { seed ^ k1, seed + k2, rotl64(seed, 21) ^ k2, ~seed };
    const uint8_t *b = p;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 4; l++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * l, 8);
            h[l] = rotl64(h[l] ^ (w * k2), 29) * k1;
        }
    }
    uint64_t tail[4] = {0, 0, 0, 0};
    if (n > i) memcpy(tail, b + i, n - i);
    for (int l = 0; l < 4; l++) h[l] = rotl64(h[l] ^ (tail[l] * k2), 29) * k1;
    return mix64(h[0] ^ rotl64(h[1], 17) ^ rotl64(h[2], 31) ^ rotl64(h[3], 47) ^ (uint64_t)n);
}

/* ---- directory ------------------------------------------------------------- */

static enum het_status mkdir_p(char *path, het_error *err)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        int rc = mkdir(path, 0755);
        int e = errno;
        *s = '/';
        if (rc != 0 && e != EEXIST) return het_error_set(err, HET_ERR_IO, "npu cache: mkdir %s: %s", path, strerror(e));
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return het_error_set(err, HET_ERR_IO, "npu cache: mkdir %s: %s", path, strerror(errno));
    return HET_OK;
}

enum het_status npu_cache_resolve_dir(struct npu_ctx *c, het_error *err)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (c->params.cache_dir && *c->params.cache_dir)   /* already copied into c->cache_dir at init */
        n = (int)strlen(c->cache_dir);
    else if (xdg && *xdg)
        n = snprintf(c->cache_dir, sizeof c->cache_dir, "%s/het/npu", xdg);
    else if (home && *home)
        n = snprintf(c->cache_dir, sizeof c->cache_dir, "%s/.cache/het/npu", home);
    else
        return het_error_set(err, HET_ERR_IO, "npu cache: neither XDG_CACHE_HOME nor HOME is set");
    if (n < 0 || (size_t)n >= sizeof c->cache_dir)
        return het_error_set(err, HET_ERR_IO, "npu cache: directory path too long");
    return mkdir_p(c->cache_dir, err);
}

/* ---- reading ----------------------------------------------------------------- */

static uint64_t header_hash(const struct cache_header *h, const void *entries, size_t entries_bytes)
{
    struct cache_header tmp = *h;
    tmp.hdr_hash = 0;
    return npu_hash64(entries, entries_bytes, npu_hash64(&tmp, sizeof tmp, 0x4E5055));
}

static enum het_status check_entry(const struct cache_entry *e, uint32_t i, size_t data_start, size_t file_size,
                                   const uint8_t *map, het_error *err)
{
    if (memchr(e->name, '\0', sizeof e->name) == NULL)
        return het_error_set(err, HET_ERR_FORMAT, "entry %u: name is not terminated", i);
    if (!het_type_is_known(e->src_type) || !het_npu_wfmt_for((enum het_type)e->src_type))
        return het_error_set(err, HET_ERR_FORMAT, "entry %u (%s): source type %u has no NPU layout", i, e->name,
                             e->src_type);
    if (e->data_off % CACHE_ALIGN || e->data_off < data_start || e->data_off > file_size ||
        e->data_bytes > file_size - e->data_off)
        return het_error_set(err, HET_ERR_FORMAT, "entry %u (%s): data [%llu, +%llu) outside the file (%zu bytes)", i,
                             e->name, (unsigned long long)e->data_off, (unsigned long long)e->data_bytes, file_size);
    if (npu_hash64(map + e->data_off, e->data_bytes, e->src_fp) != e->data_hash)
        return het_error_set(err, HET_ERR_FORMAT, "entry %u (%s): data hash mismatch", i, e->name);
    return HET_OK;
}

static enum het_status validate(struct npu_cache_file *f, uint64_t key, het_error *err)
{
    if (f->size < sizeof(struct cache_header))
        return het_error_set(err, HET_ERR_FORMAT, "file of %zu bytes is shorter than the header", f->size);
    struct cache_header h;
    memcpy(&h, f->map, sizeof h);
    if (memcmp(h.magic, CACHE_MAGIC, 8) != 0) return het_error_set(err, HET_ERR_FORMAT, "bad magic");
    if (h.format != CACHE_FORMAT || h.layout != HET_NPU_LAYOUT_VERSION)
        return het_error_set(err, HET_ERR_FORMAT, "format %u / layout %u, expected %u / %u", h.format, h.layout,
                             CACHE_FORMAT, HET_NPU_LAYOUT_VERSION);
    if (h.key != key) return het_error_set(err, HET_ERR_FORMAT, "model key differs");
    if (h.entry_size != sizeof(struct cache_entry) || h.n_entries > CACHE_MAX_ENTRIES)
        return het_error_set(err, HET_ERR_FORMAT, "entry size %u / count %u invalid", h.entry_size, h.n_entries);
    if (h.file_size != f->size)
        return het_error_set(err, HET_ERR_FORMAT, "header says %llu bytes, file has %zu (truncated?)",
                             (unsigned long long)h.file_size, f->size);
    const size_t ebytes = (size_t)h.n_entries * sizeof(struct cache_entry);
    if (ebytes > f->size - sizeof h) return het_error_set(err, HET_ERR_FORMAT, "entries run past the file");
    const uint8_t *eptr = f->map + sizeof h;
    if (header_hash(&h, eptr, ebytes) != h.hdr_hash) return het_error_set(err, HET_ERR_FORMAT, "header hash mismatch");
    f->entries = (const struct cache_entry *)eptr;   /* 48 + 144*i keeps 8-byte alignment */
    f->n = h.n_entries;
    for (uint32_t i = 0; i < f->n; i++) {
        enum het_status st = check_entry(&f->entries[i], i, sizeof h + ebytes, f->size, f->map, err);
        if (st != HET_OK) return st;
    }
    return HET_OK;
}

enum het_status npu_cache_open(const char *path, uint64_t key, struct npu_cache_file **out, het_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return het_error_set(err, HET_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return het_error_set(err, HET_ERR_FORMAT, "%s: empty or unreadable", path);
    }
    struct npu_cache_file *f = calloc(1, sizeof *f);
    if (!f) {
        close(fd);
        return het_error_set(err, HET_ERR_NOMEM, "npu cache: out of memory");
    }
    f->size = (size_t)st.st_size;
    void *m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        free(f);
        return het_error_set(err, HET_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    }
    f->map = m;
    enum het_status s = validate(f, key, err);
    if (s != HET_OK) {
        het_error_prefix(err, "%s", path);
        npu_cache_close(f);
        return s;
    }
    *out = f;
    return HET_OK;
}

void npu_cache_close(struct npu_cache_file *f)
{
    if (!f) return;
    if (f->map) munmap(f->map, f->size);
    free(f);
}

const void *npu_cache_find(const struct npu_cache_file *f, const char *name, enum het_type type, const int64_t ne[4],
                           uint64_t fp, const struct het_npu_wdesc *d)
{
    for (uint32_t i = 0; i < f->n; i++) {
        const struct cache_entry *e = &f->entries[i];
        if (strcmp(e->name, name) != 0 || e->src_type != (uint32_t)type || e->src_fp != fp) continue;
        if (memcmp(e->ne, ne, sizeof e->ne) != 0) continue;
        if (e->fmt != (uint32_t)d->fmt || e->flags != d->flags || e->zp != d->zp_bf16 || e->data_bytes != d->total_bytes)
            continue;
        return f->map + e->data_off;
    }
    return NULL;
}

/* ---- writing ----------------------------------------------------------------- */

static enum het_status write_all(int fd, const void *p, size_t n, uint64_t off, const char *path, het_error *err)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = pwrite(fd, b, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return het_error_set(err, HET_ERR_IO, "%s: write: %s", path, w < 0 ? strerror(errno) : "short write");
        b += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return HET_OK;
}

enum het_status npu_cache_write(const char *path, uint64_t key, struct npu_wrec *const *recs, int n, het_error *err)
{
    if (n < 0 || (uint32_t)n > CACHE_MAX_ENTRIES) return het_error_set(err, HET_ERR_INVALID, "npu cache: %d entries", n);
    struct cache_entry *ents = calloc((size_t)n + 1, sizeof *ents);
    if (!ents) return het_error_set(err, HET_ERR_NOMEM, "npu cache: out of memory");
    struct cache_header h = { .format = CACHE_FORMAT, .layout = HET_NPU_LAYOUT_VERSION, .key = key,
                              .n_entries = (uint32_t)n, .entry_size = sizeof(struct cache_entry) };
    memcpy(h.magic, CACHE_MAGIC, 8);
    uint64_t off = sizeof h + (uint64_t)n * sizeof *ents;
    for (int i = 0; i < n; i++) {
        const struct npu_wrec *r = recs[i];
        struct cache_entry *e = &ents[i];
        snprintf(e->name, sizeof e->name, "%s", r->name);
        e->src_type = (uint32_t)r->type;
        e->fmt = (uint32_t)r->d.fmt;
        e->flags = r->d.flags;
        e->zp = r->d.zp_bf16;
        memcpy(e->ne, r->ne, sizeof e->ne);
        e->src_fp = r->fp;
        off = (off + CACHE_ALIGN - 1) / CACHE_ALIGN * CACHE_ALIGN;
        e->data_off = off;
        e->data_bytes = r->d.total_bytes;
        e->data_hash = npu_hash64(r->data, r->d.total_bytes, r->fp);
        off += r->d.total_bytes;
    }
    h.file_size = off;
    h.hdr_hash = header_hash(&h, ents, (size_t)n * sizeof *ents);

    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(ents);
        return het_error_set(err, HET_ERR_IO, "%s: %s", tmp, strerror(errno));
    }
    enum het_status st = write_all(fd, &h, sizeof h, 0, tmp, err);
    if (st == HET_OK) st = write_all(fd, ents, (size_t)n * sizeof *ents, sizeof h, tmp, err);
    for (int i = 0; st == HET_OK && i < n; i++)
        st = write_all(fd, recs[i]->data, recs[i]->d.total_bytes, ents[i].data_off, tmp, err);
    if (st == HET_OK && ftruncate(fd, (off_t)h.file_size) != 0)
        st = het_error_set(err, HET_ERR_IO, "%s: ftruncate: %s", tmp, strerror(errno));
    if (close(fd) != 0 && st == HET_OK) st = het_error_set(err, HET_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (st == HET_OK && rename(tmp, path) != 0)
        st = het_error_set(err, HET_ERR_IO, "rename %s -> %s: %s", tmp, path, strerror(errno));
    if (st != HET_OK) unlink(tmp);
    free(ents);
    return st;
}
