/*
 * test_pool.c — the shared memory pool: sub-allocator against a reference
 * model, exhaustion and fault injection without partial state, backing
 * choice and skip reasons, the NPU provider hook, shared pages seen through
 * a second mapping, and dma-buf backings where this machine has them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "het/pool.h"
#include "memory/backing.h"
#include "memory/suballoc.h"
#include "testutil.h"

#define KIB ((size_t)1024)
#define MIB (KIB * 1024)

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

static bool same_stats(const struct het_pool_stats *a, const struct het_pool_stats *b)
{
    return a->used == b->used && a->n_allocs == b->n_allocs && a->n_free_blocks == b->n_free_blocks &&
           a->largest_free == b->largest_free && a->total_allocs == b->total_allocs && a->peak == b->peak;
}

static het_pool *memfd_pool(size_t size)
{
    struct het_pool_params p = { .size = size, .order = { HET_POOL_BACKING_MEMFD }, .n_order = 1 };
    het_error err = { 0 };
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool != NULL, "memfd pool of %zu bytes: %s", size, err.msg);
    return pool;
}

/* ---- sub-allocator vs reference model ------------------------------------ */

struct model {
    size_t   granule, n;           /* n granules                     */
    uint8_t *busy;                 /* per granule                     */
    size_t   live_off[4096], live_size[4096];
    int      n_live;
    size_t   used;
};

static bool model_range_free(const struct model *m, size_t off, size_t size)
{
    for (size_t g = off / m->granule; g < (off + size) / m->granule; g++)
        if (m->busy[g]) return false;
    return true;
}

static void model_mark(struct model *m, size_t off, size_t size, uint8_t v)
{
    memset(m->busy + off / m->granule, v, size / m->granule);
}

/* Is there any aligned place for need bytes? (completeness check) */
static bool model_can_fit(const struct model *m, size_t need, size_t align)
{
    size_t ng = need / m->granule, step = align / m->granule;
    for (size_t g = 0; g + ng <= m->n; g += step) {
        size_t k = 0;
        while (k < ng && !m->busy[g + k]) k++;
        if (k == ng) return true;
    }
    return false;
}

static size_t rand_size(size_t granule, size_t total)
{
    switch (het_test_rand_u64() % 6) {
    case 0:  return 1 + het_test_rand_u64() % granule;                      /* sub-granule, odd */
    case 1:  return granule * (1 + het_test_rand_u64() % 3) + 1;            /* just over       */
    case 2:  return granule * (1 + het_test_rand_u64() % 16);
    case 3:  return 1 + het_test_rand_u64() % (total / 16);
    case 4:  return 1 + het_test_rand_u64() % (total / 4);
    default: return granule * (1 + het_test_rand_u64() % 64) - 1;
    }
}

static size_t rand_align(void)
{
    static const size_t aligns[] = { 0, 1, 64, 4096, 8192, 65536, 2 * MIB };
    return aligns[het_test_rand_u64() % (sizeof aligns / sizeof aligns[0])];
}

static void sa_try_alloc(struct het_suballoc *sa, struct model *m, int *n_fail)
{
    size_t size = rand_size(m->granule, sa->total), align = rand_align();
    size_t ealign = align < m->granule ? m->granule : align;
    size_t need = (size + m->granule - 1) / m->granule * m->granule;
    size_t off = 1, got = 1, used0 = sa->used;
    het_error err = { 0 };
    enum het_status st = het_suballoc_alloc(sa, size, align, &off, &got, &err);
    if (st != HET_OK) {
        (*n_fail)++;
        CHECK(st == HET_ERR_NOMEM && off == 0 && got == 0 && sa->used == used0, "failed alloc: %s", err.msg);
        CHECK(size > sa->total || !model_can_fit(m, need, ealign),
              "alloc of %zu at %zu refused but the model has room: %s", size, ealign, err.msg);
        return;
    }
    CHECK(off % ealign == 0, "offset %zu not aligned to %zu", off, ealign);
    CHECK(got == need && off + got <= sa->total, "slice [%zu,+%zu) for %zu bytes", off, got, size);
    CHECK(model_range_free(m, off, got), "slice [%zu,+%zu) overlaps a live slice", off, got);
    if (m->n_live == 4096) return;
    model_mark(m, off, got, 1);
    m->live_off[m->n_live] = off;
    m->live_size[m->n_live++] = got;
    m->used += got;
}

static void sa_release_one(struct het_suballoc *sa, struct model *m)
{
    int i = (int)(het_test_rand_u64() % (uint64_t)m->n_live);
    size_t off = m->live_off[i], size = m->live_size[i];
    het_error err = { 0 };
    /* wrong size and a non-start offset must be refused without effect */
    size_t used0 = sa->used;
    CHECK(het_suballoc_release(sa, off, size + m->granule, &err) == HET_ERR_INVALID, "wrong size accepted");
    if (size > m->granule)
        CHECK(het_suballoc_release(sa, off + m->granule, m->granule, &err) == HET_ERR_INVALID,
              "inner offset accepted");
    CHECK(sa->used == used0, "refused release changed state");
    CHECK(het_suballoc_release(sa, off, size, &err) == HET_OK, "release [%zu,+%zu): %s", off, size, err.msg);
    CHECK(het_suballoc_release(sa, off, size, &err) == HET_ERR_INVALID, "double release accepted");
    model_mark(m, off, size, 0);
    m->used -= size;
    m->live_off[i] = m->live_off[m->n_live - 1];
    m->live_size[i] = m->live_size[--m->n_live];
}

static void test_suballoc_random(size_t granule, size_t n_granules, int n_ops, uint64_t seed)
{
    het_test_seed(seed);
    struct het_suballoc sa;
    het_error err = { 0 };
    CHECK(het_suballoc_init(&sa, granule * n_granules, granule, &err) == HET_OK, "init: %s", err.msg);
    struct model *m = calloc(1, sizeof *m);
    m->granule = granule;
    m->n = n_granules;
    m->busy = calloc(n_granules, 1);
    int n_fail = 0, bad_checks = 0;
    size_t peak_live = 0;
    for (int op = 0; op < n_ops; op++) {
        bool grow = (op / 500) % 2 == 0;   /* phases: mostly alloc, then mostly free */
        if (m->n_live == 0 || het_test_rand_u64() % 100 < (grow ? 70u : 35u)) sa_try_alloc(&sa, m, &n_fail);
        else sa_release_one(&sa, m);
        if ((size_t)m->n_live > peak_live) peak_live = (size_t)m->n_live;
        if (het_suballoc_check(&sa, &err) != HET_OK && bad_checks++ < 3) CHECK(0, "op %d: %s", op, err.msg);
        if (sa.used != m->used && bad_checks++ < 3) CHECK(0, "op %d: used %zu, model %zu", op, sa.used, m->used);
        if (sa.n_used != (uint64_t)m->n_live && bad_checks++ < 3) CHECK(0, "op %d: live count", op);
    }
    CHECK(bad_checks == 0, "%d invariant failures", bad_checks);
    CHECK(n_fail > 0 && peak_live > 20, "sequence too easy: %d failures, peak %zu live", n_fail, peak_live);
    /* non-power-of-two alignments are refused */
    size_t off, got;
    CHECK(het_suballoc_alloc(&sa, granule, 12288, &off, &got, &err) == HET_ERR_INVALID, "align 12288");
    CHECK(het_suballoc_alloc(&sa, granule, 4097, &off, &got, &err) == HET_ERR_INVALID, "align 4097");
    CHECK(het_suballoc_alloc(&sa, 0, 0, &off, &got, &err) == HET_ERR_INVALID, "size 0");
    while (m->n_live) sa_release_one(&sa, m);
    CHECK(sa.n_free == 1 && sa.used == 0 && het_suballoc_largest_free(&sa) == sa.total,
          "after freeing all: %llu free blocks, largest %zu of %zu", (unsigned long long)sa.n_free,
          het_suballoc_largest_free(&sa), sa.total);
    CHECK(het_suballoc_check(&sa, &err) == HET_OK, "final check: %s", err.msg);
    het_suballoc_free(&sa);
    free(m->busy);
    free(m);
}

/* ---- pool: allocation, exhaustion, faults -------------------------------- */

static void test_alignment_and_sizes(void)
{
    het_pool *pool = memfd_pool(16 * MIB);
    if (!pool) return;
    het_error err = { 0 };
    struct het_slice s;
    size_t aligns[] = { 4096, 8192, 65536, 2 * MIB };
    for (int round = 0; round < 3; round++)
        for (size_t i = 0; i < 4; i++) {
            CHECK(het_pool_alloc(pool, 4097 + 12345 * i, aligns[i], &s, &err) == HET_OK, "%s", err.msg);
            CHECK(s.offset % aligns[i] == 0 && s.size == (4097 + 12345 * i + 4095) / 4096 * 4096,
                  "align %zu: slice [%zu,+%zu)", aligns[i], s.offset, s.size);
        }
    struct het_pool_stats a, b;
    het_pool_get_stats(pool, &a);
    CHECK(het_pool_alloc(pool, 100, 12288, &s, &err) == HET_ERR_INVALID, "align 12288 accepted");
    CHECK(strstr(err.msg, "12288 is not a power of two") != NULL, "message: %s", err.msg);
    CHECK(het_pool_alloc(pool, 0, 0, &s, &err) == HET_ERR_INVALID, "size 0 accepted");
    CHECK(het_pool_alloc(pool, 1, 1, &s, &err) == HET_OK && s.size == 4096, "1 byte: %s", err.msg);
    het_pool_release(pool, s, &err);
    het_pool_get_stats(pool, &b);
    CHECK(a.used == b.used && a.n_allocs == b.n_allocs, "refused requests changed state");
    het_pool_free(pool);

    /* a device that needs 64 KiB raises the granule for every slice */
    struct het_pool_params p = { .size = 1 * MIB + 1, .min_align = 65536 };
    pool = het_pool_init(&p, &err);
    CHECK(pool && het_pool_granule(pool) == 65536 && het_pool_size(pool) == 17 * 65536, "min_align 65536: %s",
          err.msg);
    if (pool) {
        CHECK(het_pool_alloc(pool, 1, 0, &s, &err) == HET_OK && s.size == 65536, "granule slice");
        CHECK(het_pool_alloc(pool, 1, 0, &s, &err) == HET_OK && s.offset == 65536, "second slice at %zu",
              s.offset);
    }
    het_pool_free(pool);
    p.min_align = 3000;
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_INVALID, "min_align 3000 accepted");
    p.min_align = 0;
    p.size = 0;
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_INVALID, "size 0 accepted");
    p.size = (size_t)1 << 50;
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_NOMEM && strstr(err.msg, "of RAM"),
          "1 PiB pool: %s", err.msg);
}

static void test_exhaustion(void)
{
    het_pool *pool = memfd_pool(1 * MIB);
    if (!pool) return;
    het_error err = { 0 };
    struct het_slice a, b, c, x = { 7, 7 };
    CHECK(het_pool_alloc(pool, 256 * KIB, 0, &a, &err) == HET_OK, "%s", err.msg);
    CHECK(het_pool_alloc(pool, 256 * KIB, 0, &b, &err) == HET_OK, "%s", err.msg);
    CHECK(het_pool_alloc(pool, 256 * KIB, 0, &c, &err) == HET_OK, "%s", err.msg);
    CHECK(het_pool_release(pool, b, &err) == HET_OK, "%s", err.msg);
    struct het_pool_stats s0, s1;
    het_pool_get_stats(pool, &s0);
    CHECK(s0.free_bytes == 512 * KIB && s0.largest_free == 256 * KIB && s0.n_free_blocks == 2, "stats");
    CHECK(s0.fragmentation > 0.49 && s0.fragmentation < 0.51, "fragmentation %.3f", s0.fragmentation);
    /* 512 KiB are free but not in one piece */
    CHECK(het_pool_alloc(pool, 512 * KIB, 0, &x, &err) == HET_ERR_NOMEM, "fragmented request succeeded");
    CHECK(x.offset == 0 && x.size == 0, "slice not cleared on failure");
    CHECK(strstr(err.msg, "pool: ") == err.msg && strstr(err.msg, "524288 bytes") &&
          strstr(err.msg, "largest free block 262144"), "message: %s", err.msg);
    CHECK(het_pool_alloc(pool, 2 * MIB, 0, &x, &err) == HET_ERR_NOMEM, "oversized request succeeded");
    het_pool_get_stats(pool, &s1);
    CHECK(same_stats(&s0, &s1) && s1.failed_allocs == s0.failed_allocs + 2, "failed requests changed state");
    /* releasing c merges b, c and the tail into one block */
    CHECK(het_pool_release(pool, c, &err) == HET_OK, "%s", err.msg);
    CHECK(het_pool_alloc(pool, 768 * KIB, 0, &x, &err) == HET_OK && x.offset == 256 * KIB, "merged: %s", err.msg);
    CHECK(het_pool_alloc(pool, 1, 0, &b, &err) == HET_ERR_NOMEM, "full pool gave a slice");
    het_pool_get_stats(pool, &s1);
    CHECK(s1.used == 1 * MIB && s1.peak == 1 * MIB && s1.largest_free == 0 && s1.fragmentation == 0.0, "full");
    CHECK(het_pool_release(pool, c, &err) == HET_ERR_INVALID && strstr(err.msg, "not the start of a live slice"),
          "stale release: %s", err.msg);
    het_pool_release(pool, a, &err);
    het_pool_release(pool, x, &err);
    het_pool_get_stats(pool, &s1);
    CHECK(s1.used == 0 && s1.n_free_blocks == 1 && s1.largest_free == 1 * MIB, "all back");
    het_pool_free(pool);
}

static void test_fault_injection(void)
{
    struct het_pool_params p = { .size = 4 * MIB, .fault_after_allocs = 3 };
    het_error err = { 0 };
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    struct het_slice s[4];
    for (int i = 0; i < 3; i++) CHECK(het_pool_alloc(pool, 8192, 0, &s[i], &err) == HET_OK, "alloc %d", i);
    struct het_pool_stats a, b;
    het_pool_get_stats(pool, &a);
    CHECK(het_pool_alloc(pool, 8192, 0, &s[3], &err) == HET_ERR_NOMEM && strstr(err.msg, "fault injection"),
          "4th alloc: %s", err.msg);
    het_pool_get_stats(pool, &b);
    CHECK(same_stats(&a, &b) && s[3].size == 0, "injected failure changed state");
    CHECK(het_pool_release(pool, s[0], &err) == HET_OK, "release under fault: %s", err.msg);
    het_pool_set_fault(pool, -1);
    CHECK(het_pool_alloc(pool, 8192, 0, &s[3], &err) == HET_OK, "after disarm: %s", err.msg);
    het_pool_set_fault(pool, 0);
    CHECK(het_pool_alloc(pool, 8192, 0, &s[0], &err) == HET_ERR_NOMEM, "armed at 0");
    het_pool_free(pool);

    p.fault_after_allocs = 0;
    setenv("HET_POOL_FAULT", "1", 1);
    pool = het_pool_init(&p, &err);
    CHECK(pool && het_pool_alloc(pool, 1, 0, &s[0], &err) == HET_OK &&
          het_pool_alloc(pool, 1, 0, &s[1], &err) == HET_ERR_NOMEM, "HET_POOL_FAULT=1");
    het_pool_free(pool);
    setenv("HET_POOL_FAULT", "x1", 1);
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_INVALID && strstr(err.msg, "HET_POOL_FAULT"),
          "bad HET_POOL_FAULT: %s", err.msg);
    unsetenv("HET_POOL_FAULT");
}

/* ---- backings ------------------------------------------------------------ */

static void check_absent_reason(const het_pool *pool, enum het_pool_backing b, const char *path)
{
    if (access(path, F_OK) == 0) return;   /* present here: reason depends on the device */
    char want[256];
    snprintf(want, sizeof want, "%s: No such file or directory", path);
    const char *r = het_pool_skip_reason(pool, b);
    CHECK(r && strcmp(r, want) == 0, "%s skipped because \"%s\", expected \"%s\"", het_pool_backing_name(b),
          r ? r : "(null)", want);
}

static void test_default_order(void)
{
    struct het_pool_params p = { .size = 8 * MIB };
    het_error err = { 0 };
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool != NULL, "default pool: %s", err.msg);
    if (!pool) return;
    char line[1024];
    het_pool_describe(pool, line, sizeof line);
    printf("%s\n", line);
    const char *npu = het_pool_skip_reason(pool, HET_POOL_BACKING_NPU);
    CHECK(npu && strstr(npu, "no NPU buffer provider"), "npu reason: %s", npu ? npu : "(null)");
    check_absent_reason(pool, HET_POOL_BACKING_DMAHEAP, "/dev/dma_heap/system");
    check_absent_reason(pool, HET_POOL_BACKING_UDMABUF, "/dev/udmabuf");
    if (het_pool_backing(pool) == HET_POOL_BACKING_MEMFD) {
        CHECK(het_pool_dmabuf_fd(pool) == -1 && het_pool_fd(pool) >= 0, "memfd fds");
        CHECK(strcmp(het_pool_backing_name(HET_POOL_BACKING_MEMFD), "memfd (not a dma-buf)") == 0, "name");
        CHECK(strstr(line, "memfd (not a dma-buf)") != NULL, "describe: %s", line);
        if (access("/dev/udmabuf", F_OK) != 0)
            CHECK(strstr(line, "udmabuf: /dev/udmabuf: No such file or directory") != NULL, "describe: %s", line);
        CHECK(het_pool_skip_reason(pool, HET_POOL_BACKING_MEMFD) == NULL, "chosen backing has a skip reason");
    }
    CHECK(((uintptr_t)het_pool_base(pool) & (2 * MIB - 1)) == 0, "base %p not 2 MiB aligned", het_pool_base(pool));
    het_pool_free(pool);
}

static void expect_forced_failure(enum het_pool_backing b, const char *path, const char *want)
{
    struct het_pool_params p = { .size = 4 * MIB, .order = { b }, .n_order = 1,
                                 .dma_heap_path = path, .udmabuf_path = path };
    het_error err = { 0 };
    int fds = count_fds();
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool == NULL && err.status != HET_OK, "forced %s on %s succeeded", het_pool_backing_name(b), path);
    CHECK(strstr(err.msg, want) != NULL, "forced %s: \"%s\" lacks \"%s\"", het_pool_backing_name(b), err.msg, want);
    CHECK(count_fds() == fds, "forced %s leaked fds", het_pool_backing_name(b));
    het_pool_free(pool);
}

static void test_forced_backings(void)
{
    expect_forced_failure(HET_POOL_BACKING_UDMABUF, "/nonexistent/udmabuf",
                          "pool: udmabuf: /nonexistent/udmabuf: No such file or directory");
    expect_forced_failure(HET_POOL_BACKING_DMAHEAP, "/nonexistent/system",
                          "pool: dma-heap system: /nonexistent/system: No such file or directory");
    expect_forced_failure(HET_POOL_BACKING_NPU, NULL, "pool: amdxdna bo: no NPU buffer provider");
    /* a node that opens but is not the device: the create ioctls are refused */
    expect_forced_failure(HET_POOL_BACKING_UDMABUF, "/dev/null",
                          "udmabuf: /dev/null: UDMABUF_CREATE(4194304 bytes): Inappropriate ioctl for device");
    expect_forced_failure(HET_POOL_BACKING_DMAHEAP, "/dev/null",
                          "dma-heap system: /dev/null: DMA_HEAP_IOCTL_ALLOC(4194304 bytes): Inappropriate ioctl");
    /* a list: every reason is in the message */
    struct het_pool_params p = { .size = 4 * MIB, .n_order = 2, .dma_heap_path = "/nonexistent/heap",
                                 .order = { HET_POOL_BACKING_NPU, HET_POOL_BACKING_DMAHEAP } };
    het_error err = { 0 };
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_NO_DEVICE &&
          strstr(err.msg, "no backing could be set up: amdxdna bo: ") &&
          strstr(err.msg, "; dma-heap system: /nonexistent/heap: No such file or directory"), "list: %s", err.msg);
    p.order[0] = (enum het_pool_backing)9;
    CHECK(het_pool_init(&p, &err) == NULL && err.status == HET_ERR_INVALID, "bad order entry accepted");
}

struct fake_npu {
    int mode;         /* 0: refuse, 1: hand back a memfd (not a dma-buf) */
    int exports, releases;
};

static int fake_export(void *ctx, size_t size, het_error *err)
{
    struct fake_npu *f = ctx;
    f->exports++;
    if (f->mode == 0) {
        het_error_set(err, HET_ERR_DEVICE, "amdxdna: BO import refused by device (test)");
        return -1;
    }
    int fd = memfd_create("fake-npu", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void fake_release(void *ctx) { ((struct fake_npu *)ctx)->releases++; }

static void test_npu_provider(void)
{
    struct fake_npu f = { 0 };
    struct het_pool_params p = { .size = 4 * MIB, .npu = { fake_export, fake_release, &f } };
    het_error err = { 0 };
    int fds = count_fds();
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool && het_pool_backing(pool) != HET_POOL_BACKING_NPU, "refusing provider: %s", err.msg);
    const char *r = pool ? het_pool_skip_reason(pool, HET_POOL_BACKING_NPU) : NULL;
    CHECK(r && strcmp(r, "export refused: amdxdna: BO import refused by device (test)") == 0, "reason: %s",
          r ? r : "(null)");
    CHECK(f.exports == 1 && f.releases == 0, "refused export: %d exports, %d releases", f.exports, f.releases);
    het_pool_free(pool);

    f.mode = 1;
    pool = het_pool_init(&p, &err);
    r = pool ? het_pool_skip_reason(pool, HET_POOL_BACKING_NPU) : NULL;
    CHECK(r && strstr(r, "which is not a dma-buf"), "non-dma-buf provider: %s", r ? r : err.msg);
    CHECK(f.exports == 2 && f.releases == 1, "rejected fd: %d exports, %d releases", f.exports, f.releases);
    het_pool_free(pool);
    CHECK(count_fds() == fds, "provider fds leaked");
}

/* ---- shared pages, laziness, sync ---------------------------------------- */

/* Bytes written through the pool are the bytes of the fd at that offset:
 * what a device importing the fd (or the host range) sees. */
static void check_shared_mapping(het_pool *pool)
{
    het_error err = { 0 };
    struct het_slice pad, s;
    CHECK(het_pool_alloc(pool, 3 * 4096 + 5, 0, &pad, &err) == HET_OK, "%s", err.msg);
    CHECK(het_pool_alloc(pool, 5 * 4096, 8192, &s, &err) == HET_OK && s.offset != 0, "%s", err.msg);
    uint8_t *p = het_pool_ptr(pool, s.offset);
    for (size_t i = 0; i < s.size; i++) p[i] = (uint8_t)(i * 131 + 7);
    CHECK(het_pool_sync_end(pool, s, HET_POOL_SYNC_WRITE, &err) == HET_OK, "sync end: %s", err.msg);
    uint8_t *q = mmap(NULL, s.size, PROT_READ | PROT_WRITE, MAP_SHARED, het_pool_fd(pool), (off_t)s.offset);
    CHECK(q != MAP_FAILED, "second mmap at offset %zu: %s", s.offset, strerror(errno));
    if (q == MAP_FAILED) return;
    CHECK(q != p, "second mapping is the same address");
    size_t bad = 0;
    for (size_t i = 0; i < s.size; i++) bad += q[i] != (uint8_t)(i * 131 + 7);
    CHECK(bad == 0, "%zu bytes differ through the second mapping", bad);
    q[100] = 0xA5;   /* and back the other way */
    CHECK(het_pool_sync_begin(pool, s, HET_POOL_SYNC_READ, &err) == HET_OK, "sync begin: %s", err.msg);
    CHECK(p[100] == 0xA5, "write through the second mapping not seen");
    munmap(q, s.size);
    size_t off;
    CHECK(het_pool_offset_of(pool, p + 9, &off) && off == s.offset + 9, "offset_of");
    het_pool_release(pool, s, &err);
    het_pool_release(pool, pad, &err);
}

static void test_memfd_pages(void)
{
    het_pool *pool = memfd_pool(64 * MIB);
    if (!pool) return;
    struct stat st;
    CHECK(fstat(het_pool_fd(pool), &st) == 0 && st.st_size == (off_t)(64 * MIB), "memfd size");
    CHECK(st.st_blocks == 0, "fresh pool already holds %lld blocks", (long long)st.st_blocks);
    int seals = fcntl(het_pool_fd(pool), F_GET_SEALS);
    CHECK(seals >= 0 && (seals & F_SEAL_SHRINK) && (seals & F_SEAL_GROW), "seals 0x%x", seals);
    CHECK(!het_backing_fd_is_dmabuf(het_pool_fd(pool)), "memfd taken for a dma-buf");
    check_shared_mapping(pool);
    CHECK(fstat(het_pool_fd(pool), &st) == 0 && st.st_blocks > 0 && (size_t)st.st_blocks * 512 < 4 * MIB,
          "touched pool holds %lld blocks", (long long)st.st_blocks);
    het_error err = { 0 };
    struct het_slice out = { 64 * MIB - 4096, 8192 };
    CHECK(het_pool_sync_begin(pool, out, HET_POOL_SYNC_READ, &err) == HET_ERR_INVALID, "sync beyond the end");
    out.offset = 0;
    CHECK(het_pool_sync_begin(pool, out, (enum het_pool_sync)4, &err) == HET_ERR_INVALID, "sync access 4");
    CHECK(het_pool_ptr(pool, 64 * MIB) == NULL && het_pool_ptr(pool, 64 * MIB - 1) != NULL, "ptr bounds");
    CHECK(!het_pool_offset_of(pool, (char *)het_pool_base(pool) + 64 * MIB, NULL), "offset_of past the end");
    het_pool_count_copy(pool, 100);
    het_pool_count_copy(pool, 28);
    struct het_pool_stats s;
    het_pool_get_stats(pool, &s);
    CHECK(s.copied_bytes == 128 && s.n_copies == 2 && s.n_syncs == 0, "copies %llu/%llu, syncs %llu",
          (unsigned long long)s.copied_bytes, (unsigned long long)s.n_copies, (unsigned long long)s.n_syncs);
    char line[512];
    het_pool_format_stats(&s, line, sizeof line);
    CHECK(strstr(line, "reserved 64.0 MiB") && strstr(line, "copied 128 B in 2 copies"), "%s", line);
    het_pool_free(pool);
}

/* het_pool_alloc_zeroed: a fresh slice reads as zero and no page of it was
 * touched (the memfd's block count does not move); a slice that reuses
 * written memory is cleared. */
static void test_alloc_zeroed(void)
{
    het_pool *pool = memfd_pool(16 * MIB);
    if (!pool) return;
    het_error err = { 0 };
    struct het_slice a, b, c;
    CHECK(het_pool_alloc(pool, 1 * MIB, 0, &a, &err) == HET_OK, "alloc: %s", err.msg);
    memset(het_pool_ptr(pool, a.offset), 0x5a, a.size);
    struct stat st0, st1;
    CHECK(fstat(het_pool_fd(pool), &st0) == 0, "fstat");
    CHECK(het_pool_alloc_zeroed(pool, 4 * MIB, 0, &b, &err) == HET_OK, "zeroed fresh: %s", err.msg);
    CHECK(fstat(het_pool_fd(pool), &st1) == 0 && st1.st_blocks == st0.st_blocks,
          "a fresh zeroed slice touches no page (%lld -> %lld blocks)", (long long)st0.st_blocks,
          (long long)st1.st_blocks);
    const unsigned char *pb = het_pool_ptr(pool, b.offset);
    size_t nz = 0;
    for (size_t i = 0; i < b.size; i += 4093) nz += pb[i] != 0;
    CHECK(nz == 0 && b.offset >= a.offset + a.size, "fresh slice reads zero (%zu nonzero samples)", nz);
    CHECK(het_pool_release(pool, a, &err) == HET_OK, "release");
    CHECK(het_pool_alloc_zeroed(pool, 512 * 1024, 0, &c, &err) == HET_OK, "zeroed reuse: %s", err.msg);
    const unsigned char *pc = het_pool_ptr(pool, c.offset);
    nz = 0;
    for (size_t i = 0; i < c.size; i++) nz += pc[i] != 0;
    CHECK(c.offset == a.offset && nz == 0, "a slice over written memory is cleared (offset %zu, %zu nonzero bytes)",
          c.offset, nz);
    het_pool_set_fault(pool, 0);
    struct het_slice d = { 1, 1 };
    CHECK(het_pool_alloc_zeroed(pool, 4096, 0, &d, &err) == HET_ERR_NOMEM && d.size == 0, "refusal passed on");
    het_pool_free(pool);
}

/* A dma-buf backing that exists on this machine gets the same checks plus
 * real DMA_BUF_IOCTL_SYNC calls; one that does not is reported. */
static void test_dmabuf_backing(enum het_pool_backing b)
{
    struct het_pool_params p = { .size = 8 * MIB, .order = { b }, .n_order = 1 };
    het_error err = { 0 };
    het_pool *pool = het_pool_init(&p, &err);
    if (!pool) {
        printf("%s not testable here: %s\n", het_pool_backing_name(b), err.msg);
        return;
    }
    CHECK(het_pool_dmabuf_fd(pool) >= 0 && het_backing_fd_is_dmabuf(het_pool_dmabuf_fd(pool)), "dma-buf fd");
    check_shared_mapping(pool);
    struct het_pool_stats s;
    het_pool_get_stats(pool, &s);
    CHECK(s.n_syncs == 2, "%llu syncs reached the dma-buf", (unsigned long long)s.n_syncs);
    printf("%s tested for real\n", het_pool_backing_name(b));
    het_pool_free(pool);
}

static void test_parse_order(void)
{
    struct het_pool_params p = { 0 };
    het_error err = { 0 };
    CHECK(het_pool_parse_order("dmaheap,memfd", &p, &err) == HET_OK && p.n_order == 2 &&
          p.order[0] == HET_POOL_BACKING_DMAHEAP && p.order[1] == HET_POOL_BACKING_MEMFD, "dmaheap,memfd");
    CHECK(het_pool_parse_order("amdxdna,udmabuf", &p, &err) == HET_OK && p.n_order == 2 &&
          p.order[0] == HET_POOL_BACKING_NPU, "aliases");
    CHECK(het_pool_parse_order("memfd,bogus", &p, &err) == HET_ERR_INVALID && strstr(err.msg, "\"bogus\""),
          "bogus: %s", err.msg);
    CHECK(het_pool_parse_order("memfd,memfd", &p, &err) == HET_ERR_INVALID, "duplicate accepted");
    CHECK(het_pool_parse_order("", &p, &err) == HET_ERR_INVALID, "empty accepted");
    CHECK(het_pool_parse_order("auto", &p, &err) == HET_OK && p.n_order == 0, "auto");
}

/* ---- threads ------------------------------------------------------------- */

struct worker {
    het_pool          *pool;
    pthread_barrier_t *full;  /* every thread holds its first slices here, then has released them */
    uint32_t           tag;
    int                bad, done;
};

/* Each thread fills its slices with its tag and checks them before release:
 * any overlap between threads' slices shows up as a foreign tag. First each
 * asks for 16 slices of 1 MiB and holds what it got until all four have
 * asked: 64 MiB from an 8 MiB pool, so allocations fail while others are in
 * flight whatever the scheduling. The random phase after it holds at most
 * 16 slices of under 96 KiB (64 KiB and its alignment) a thread, 6 MiB in
 * all: no thread is starved of the pool by the others. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct het_slice live[16];
    int n = 0;
    for (int i = 0; i < 16; i++) {
        het_error err;
        if (het_pool_alloc(w->pool, 1 * MIB, 4096, &live[n], &err) == HET_OK) n++;
    }
    pthread_barrier_wait(w->full);
    while (n) het_pool_release(w->pool, live[--n], NULL);
    pthread_barrier_wait(w->full); /* and the pool is empty again before the random phase */
    uint64_t x = w->tag * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        if (n < 16 && (n == 0 || x % 3)) {
            het_error err;
            if (het_pool_alloc(w->pool, 1 + x % (64 * KIB), (size_t)4096 << (x % 4), &live[n], &err) != HET_OK)
                continue;
            uint32_t *p = het_pool_ptr(w->pool, live[n].offset);
            for (size_t k = 0; k < live[n].size / 4; k += 97) p[k] = w->tag;
            n++;
        } else {
            int k = (int)(x % (uint64_t)n);
            const uint32_t *p = het_pool_ptr(w->pool, live[k].offset);
            for (size_t j = 0; j < live[k].size / 4; j += 97) w->bad += p[j] != w->tag;
            het_pool_release(w->pool, live[k], NULL);
            live[k] = live[--n];
            w->done++;
        }
    }
    while (n) het_pool_release(w->pool, live[--n], NULL);
    return NULL;
}

static void test_threads(void)
{
    het_pool *pool = memfd_pool(8 * MIB);
    if (!pool) return;
    struct worker w[4];
    pthread_t th[4];
    pthread_barrier_t full;
    pthread_barrier_init(&full, NULL, 4);
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){ .pool = pool, .full = &full, .tag = 0xC0DE0000u + (uint32_t)i };
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&full);
    for (int i = 0; i < 4; i++) CHECK(w[i].bad == 0 && w[i].done > 100, "thread %d: %d bad, %d done", i, w[i].bad,
                                     w[i].done);
    struct het_pool_stats s;
    het_pool_get_stats(pool, &s);
    CHECK(s.used == 0 && s.n_free_blocks == 1 && s.failed_allocs > 0, "after threads: used %zu, %llu free blocks, "
          "%llu failed", s.used, (unsigned long long)s.n_free_blocks, (unsigned long long)s.failed_allocs);
    het_pool_free(pool);
}

int main(void)
{
    unsetenv("HET_POOL_FAULT");
    test_suballoc_random(4096, 1024, 20000, 1);
    test_suballoc_random(4096, 997, 10000, 2);     /* size not a power of two */
    test_suballoc_random(65536, 300, 10000, 3);    /* granule above every small alignment */
    test_alignment_and_sizes();
    test_exhaustion();
    test_fault_injection();
    test_default_order();
    test_forced_backings();
    test_npu_provider();
    test_memfd_pages();
    test_alloc_zeroed();
    test_dmabuf_backing(HET_POOL_BACKING_DMAHEAP);
    test_dmabuf_backing(HET_POOL_BACKING_UDMABUF);
    test_parse_order();
    test_threads();
    het_pool_free(NULL);
    return het_test_finish();
}
