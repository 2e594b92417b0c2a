/*
 * test_pool_devices.c — the shared memory pool in use by real devices: a
 * model split between the CPU and Vulkan (lavapipe on machines without a
 * GPU) in alternation with every tensor in the pool and not one byte
 * copied; a value written by one device read by the other through the same
 * pages (CPU -> Vulkan -> CPU, at slice offsets that are not the pool's
 * start and not page aligned); a device that refuses the import (forced);
 * the pool running out at each place a run allocates from it.
 *
 * Vulkan parts print why they are skipped when no Vulkan device exists; the
 * rest then runs with a second CPU device in Vulkan's place.
 */
#include "het/model.h"
#include "het/pool.h"
#include "het/sched.h"
#include "sched/device_impl.h"
#include "testutil.h"

#ifdef HET_HAVE_VULKAN
#include "devices/vulkan/vk_internal.h"
#include "het/vulkan.h"
#endif

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define N_GEN 24

static het_pool *make_pool(size_t size)
{
    struct het_pool_params p = { .size = size, .name = "test-pool" };
    het_error err = { 0 };
    het_pool *pool = het_pool_init(&p, &err);
    CHECK(pool != NULL, "pool of %zu bytes: %s", size, err.msg);
    return pool;
}

/* The second device: Vulkan when there is one (no_import: refuse host
 * pointers, i.e. mirror with copies), else NULL. */
static het_device *open_vulkan(bool no_import)
{
#ifdef HET_HAVE_VULKAN
    struct het_vk_options opt = { .no_import = no_import };
    het_error err = { 0 };
    return het_vk_device_init_opts(-1, &opt, &err);
#else
    (void)no_import;
    return NULL;
#endif
}

static bool in_pool(const het_pool *pool, const struct het_tensor *t)
{
    size_t n = het_nbytes(t), off;
    if (!n) return true;
    return t->data && het_pool_offset_of(pool, t->data, &off) && n <= het_pool_size(pool) - off;
}

/* Every tensor a graph touches (nodes, leaves, views, weights, KV cache). */
static int count_outside(const het_pool *pool, const het_graph *g)
{
    int bad = 0;
    for (int i = 0; i < het_graph_n_tensors(g); i++) {
        const struct het_tensor *t = het_graph_tensor(g, i);
        bad += !in_pool(pool, t);
        for (int k = 0; k < HET_MAX_SRC; k++) bad += t->src[k] && !in_pool(pool, t->src[k]);
    }
    return bad;
}

/* ---------------------------------------------------------------------------
 * a model run                                                               */

struct run {
    het_device  *devs[2];
    int          n_devs;
    het_pool    *pool;
    het_model   *model;
    het_sched   *sched;
    het_context *ctx;
};

/* Devices are the caller's. pool NULL: the classic set-up (mapped weights). */
static bool run_open(struct run *r, const char *path, het_pool *pool, const struct het_policy *policy, het_error *err)
{
    r->pool = pool;
    r->model = het_model_load_into(path, pool, err);
    if (!r->model) return false;
    struct het_sched_params sp = { .devices = r->devs, .n_devices = r->n_devs, .policy = policy, .pool = pool };
    r->sched = het_sched_init(&sp, err);
    if (!r->sched) return false;
    if (!pool) {
        size_t size;
        const void *base = het_gguf_file_data(het_model_gguf(r->model), &size);
        if (het_sched_register_memory(r->sched, (void *)base, size, 0, err) != HET_OK) return false;
    }
    if (het_model_prepare(r->model, r->sched, err) != HET_OK) return false;
    struct het_context_params cp = { .n_ctx = 512, .sched = r->sched, .pool = pool };
    r->ctx = het_context_init(r->model, &cp, err);
    return r->ctx != NULL;
}

/* Context and scheduler; the model goes after the devices (they may keep
 * repacked weights attached to it). */
static void run_close(struct run *r)
{
    het_context_free(r->ctx);
    het_sched_free(r->sched);
    r->ctx = NULL;
    r->sched = NULL;
}

static const int32_t prompt[] = { 1, 403, 407, 261, 378, 284 };
#define N_PROMPT ((int)(sizeof prompt / sizeof prompt[0]))

/* Greedy: prompt, then n tokens. */
static bool generate(struct run *r, const int32_t *p, int n_p, int n, int32_t *out, het_error *err)
{
    const int32_t V = het_model_get_config(r->model)->n_vocab;
    if (het_context_eval(r->ctx, p, n_p, false, err) != HET_OK) return false;
    for (int i = 0; i < n; i++) {
        out[i] = het_argmax(het_context_logits(r->ctx, NULL), V);
        if (i + 1 < n && het_context_eval(r->ctx, &out[i], 1, false, err) != HET_OK) return false;
    }
    return true;
}

static void device_copies(het_device *const *devs, int n, uint64_t *copied, uint64_t *splits)
{
    for (int i = 0; i < n; i++) {
        struct het_device_stats ds;
        het_device_get_stats(devs[i], &ds);
        copied[i] = ds.copied_bytes;
        splits[i] = ds.n_splits;
    }
}

enum second { SECOND_VULKAN, SECOND_VULKAN_NO_IMPORT, SECOND_CPU };

static het_device *open_second(enum second kind)
{
    het_error err = { 0 };
    if (kind == SECOND_CPU) return het_cpu_device_init(1, &err);
    return open_vulkan(kind == SECOND_VULKAN_NO_IMPORT);
}

/* CPU alone without a pool gives the reference tokens; CPU + second device
 * in alternation with every tensor in one pool must give the same ones. */
static void check_split_run(const char *path, enum second kind, const int32_t *ref)
{
    het_error err = { 0 };
    const bool expect_copies = kind == SECOND_VULKAN_NO_IMPORT;
    het_pool *pool = make_pool(64u << 20);
    het_device *cpu = het_cpu_device_init(1, &err), *second = open_second(kind);
    CHECK(second != NULL, "second device (%d)", (int)kind);
    struct run r = { .devs = { cpu, second }, .n_devs = 2 };
    if (!pool || !cpu || !second) goto out;
    int32_t got[N_GEN];
    bool ok = run_open(&r, path, pool, &het_policy_alternate, &err);
    CHECK(ok, "pooled run: %s", err.msg);
    ok = ok && generate(&r, prompt, N_PROMPT, N_GEN, got, &err);
    CHECK(ok, "pooled generate: %s", err.msg);
    if (ok) {
        CHECK(memcmp(got, ref, sizeof got) == 0, "same greedy tokens as the CPU alone (first: %d vs %d)", got[0],
              ref[0]);
        CHECK(het_model_pool(r.model) == pool, "weights placed in the pool");
        int outside = 0;
        for (int i = 0; i < het_model_n_weights(r.model); i++) outside += !in_pool(pool, het_model_weight(r.model, i));
        CHECK(outside == 0, "%d weights outside the pool", outside);
        CHECK(count_outside(pool, het_sched_last_graph(r.sched)) == 0,
              "every tensor of the last graph (nodes, inputs, views, weights, KV cache) lies in the pool");
        struct het_pool_stats ps;
        het_pool_get_stats(pool, &ps);
        uint64_t copied[2], splits[2];
        device_copies(r.devs, 2, copied, splits);
        struct het_sched_stats ss;
        het_sched_get_stats(r.sched, &ss);
        CHECK(splits[0] > 0 && splits[1] > 0 && ss.n_handoffs > (uint64_t)N_GEN,
              "both devices ran (%llu, %llu splits), %llu hand-offs", (unsigned long long)splits[0],
              (unsigned long long)splits[1], (unsigned long long)ss.n_handoffs);
        CHECK(ps.copied_bytes == copied[0] + copied[1], "the pool counted every copy the devices made (%llu vs %llu)",
              (unsigned long long)ps.copied_bytes, (unsigned long long)(copied[0] + copied[1]));
        /* a driver that refused the import probe (seen on NVIDIA's) mirrors the pool */
        if (expect_copies || strstr(het_device_description(second), "refused host import")) {
            CHECK(ps.copied_bytes > 0 && ps.n_copies > 0, "a refused import shows as copies: %llu bytes",
                  (unsigned long long)ps.copied_bytes);
            CHECK(strstr(het_device_pool_import(second), "mirrored") != NULL, "reported as mirrored: '%s'",
                  het_device_pool_import(second));
        } else {
            CHECK(ps.copied_bytes == 0 && ps.n_copies == 0, "zero copies for weights and activations, got %llu bytes",
                  (unsigned long long)ps.copied_bytes);
        }
        CHECK(ss.scratch_peak_bytes > 0 && ss.scratch_peak_bytes < ss.scratch_naive_bytes,
              "scratch peak %zu below the naive sum %zu", ss.scratch_peak_bytes, ss.scratch_naive_bytes);
        printf("  %s: %d tokens, %llu hand-offs, copied %llu bytes, pool used %zu of %zu, import: %s\n",
               het_device_name(second), N_GEN, (unsigned long long)ss.n_handoffs, (unsigned long long)ps.copied_bytes,
               ps.used, ps.reserved, het_device_pool_import(second));
    }
    run_close(&r);
out:
    het_device_free(cpu);
    het_device_free(second);
    het_model_free(r.model);
    if (pool) {
        struct het_pool_stats ps;
        het_pool_get_stats(pool, &ps);
        CHECK(ps.used == 0, "model, context, scheduler and devices gave their slices back (%zu bytes left)", ps.used);
    }
    het_pool_free(pool);
}

static void test_model_split(const char *path)
{
    if (!het_test_file_exists(path)) {
        printf("  %s missing: model runs skipped\n", path);
        return;
    }
    het_error err = { 0 };
    int32_t ref[N_GEN];
    struct run r = { .devs = { het_cpu_device_init(1, &err) }, .n_devs = 1 };
    bool ok = r.devs[0] && run_open(&r, path, NULL, &het_policy_first, &err) &&
              generate(&r, prompt, N_PROMPT, N_GEN, ref, &err);
    CHECK(ok, "reference run: %s", err.msg);
    run_close(&r);
    het_device_free(r.devs[0]);
    het_model_free(r.model);
    if (!ok) return;

    het_device *vk = open_vulkan(false);
    het_device_free(vk);
    if (vk) {
        check_split_run(path, SECOND_VULKAN, ref);
        check_split_run(path, SECOND_VULKAN_NO_IMPORT, ref);   /* import refused: mirrored, copies counted */
    } else {
        printf("  no Vulkan device: CPU + Vulkan parts skipped; the split runs on two CPU devices\n");
        check_split_run(path, SECOND_CPU, ref);
    }
}

/* ---------------------------------------------------------------------------
 * CPU -> second device -> CPU through the same pages                        */

#define HN 1003   /* elements: not a multiple of any vector width */

/* Byte offsets inside the data slice: 4-byte aligned only, several crossing
 * a page boundary (each tensor spans 4012 bytes). */
static const size_t hoff[7] = { 12, 4100, 12284, 20516, 28676, 45052, 53256 };

static void test_handoff(het_device *second, bool expect_copies)
{
    het_error err = { 0 };
    het_pool *pool = make_pool((8u << 20) + 12345);   /* not a multiple of 2 MiB: rounded to the granule */
    het_device *cpu = het_cpu_device_init(1, &err);
    if (!pool || !cpu) goto out;
    CHECK(het_pool_size(pool) % het_pool_granule(pool) == 0, "pool size rounded to the granule");
    struct het_slice pad, sl, bad;
    CHECK(het_pool_alloc(pool, 3 * 4096 + 100, 0, &pad, &err) == HET_OK, "pad: %s", err.msg);
    CHECK(het_pool_alloc(pool, 100, 3, &bad, &err) == HET_ERR_INVALID, "alignment 3 refused");
    CHECK(het_pool_alloc(pool, 64u << 10, 1u << 16, &sl, &err) == HET_OK && sl.offset > 0 && sl.offset % 65536 == 0,
          "data slice at a nonzero 64 KiB-aligned offset: %zu", sl.offset);
    uint8_t *base = het_pool_ptr(pool, sl.offset);

    het_graph *g = het_graph_init(64);
    struct het_tensor *x = het_new_tensor_1d(g, HET_TYPE_F32, HN), *w = het_new_tensor_1d(g, HET_TYPE_F32, HN);
    x->flags |= HET_TENSOR_FLAG_INPUT;
    w->flags |= HET_TENSOR_FLAG_INPUT;
    struct het_tensor *n1 = het_scale(g, x, 2.0f);
    struct het_tensor *n2 = het_add(g, n1, w);
    struct het_tensor *n3 = het_mul(g, n2, n1);
    struct het_tensor *n4 = het_add(g, n3, x);
    struct het_tensor *n5 = het_scale(g, n4, 0.5f);
    struct het_tensor *all[7] = { x, w, n1, n2, n3, n4, n5 };
    for (int i = 0; i < 7; i++) all[i]->data = base + hoff[i];
    n5->flags |= HET_TENSOR_FLAG_OUTPUT;
    float *xs = x->data, *ws = w->data;
    het_test_fill_normal(xs, HN, 1.0f);
    het_test_fill_normal(ws, HN, 1.0f);

    het_device *devs[2] = { cpu, second };
    struct het_sched_params sp = { .devices = devs, .n_devices = 2, .policy = &het_policy_alternate, .pool = pool };
    het_sched *s = het_sched_init(&sp, &err);
    CHECK(s != NULL, "sched: %s", err.msg);
    uint64_t c0[2], s0[2], c1[2], s1[2];
    device_copies(devs, 2, c0, s0);
    bool ok = s && het_sched_alloc_graph(s, g, &err) == HET_OK && het_sched_compute(s, g, &err) == HET_OK;
    CHECK(ok, "compute: %s", err.msg);
    device_copies(devs, 2, c1, s1);
    if (ok) {
        CHECK(s1[0] - s0[0] >= 2 && s1[1] - s0[1] >= 2, "both devices ran splits (%llu, %llu)",
              (unsigned long long)(s1[0] - s0[0]), (unsigned long long)(s1[1] - s0[1]));
        /* the same pages, seen through a second, independent mapping of the pool's fd */
        size_t len = het_pool_size(pool);
        const uint8_t *view = mmap(NULL, len, PROT_READ, MAP_SHARED, het_pool_fd(pool), 0);
        CHECK(view != MAP_FAILED, "second mapping of the pool");
        int bad_cpu = 0, bad_map = 0;
        for (int i = 0; i < HN; i++) {
            float e1 = 2.0f * xs[i], e2 = e1 + ws[i], e3 = e2 * e1, e4 = e3 + xs[i], e5 = e4 * 0.5f;
            const float want[5] = { e1, e2, e3, e4, e5 };
            for (int k = 0; k < 5; k++) {
                float v = ((const float *)all[k + 2]->data)[i];
                bad_cpu += !(v == want[k] || (v - want[k]) * (v - want[k]) <= 1e-10f * (1 + want[k] * want[k]));
                if (view != MAP_FAILED) {
                    float m;
                    memcpy(&m, view + sl.offset + hoff[k + 2] + (size_t)i * 4, 4);
                    bad_map += memcmp(&m, &v, 4) != 0;
                }
            }
        }
        CHECK(bad_cpu == 0, "%d values wrong after CPU -> %s -> CPU", bad_cpu, het_device_name(second));
        CHECK(bad_map == 0, "%d values differ between the pool mapping and a second mapping of its pages", bad_map);
        if (view != MAP_FAILED) munmap((void *)view, len);
        struct het_pool_stats ps;
        het_pool_get_stats(pool, &ps);
        uint64_t dc = (c1[0] - c0[0]) + (c1[1] - c0[1]);
        if (expect_copies) CHECK(dc > 0 && ps.copied_bytes >= dc, "mirror: %llu bytes copied and counted",
                                 (unsigned long long)dc);
        else CHECK(dc == 0 && ps.copied_bytes == 0, "no staging: %llu bytes copied", (unsigned long long)dc);
    }
    het_sched_free(s);
    het_graph_free(g);
out:
    het_device_free(cpu);
    het_pool_free(pool);
}

/* ---------------------------------------------------------------------------
 * registration: refusals, sharing, regions                                  */

static bool any_op(het_device *d, const struct het_tensor *n) { return true; }
static enum het_status no_run(het_device *d, struct het_tensor *const *nodes, int n, het_error *err)
{
    return HET_OK;
}
static enum het_status refuse_memory(het_device *d, void *base, size_t size, enum het_memory_kind kind,
                                     het_error *err)
{
    return het_error_set(err, HET_ERR_UNSUPPORTED, "refuser: cannot import %zu bytes at %p", size, base);
}
static enum het_status refuse_pool(het_device *d, struct het_pool *pool, het_error *err)
{
    return het_error_set(err, HET_ERR_UNSUPPORTED, "refuser: pool backing %s not importable",
                         het_pool_backing_name(het_pool_backing(pool)));
}
static const struct het_device_i refuse_mem_iface = { .supports_op = any_op, .register_memory = refuse_memory,
                                                      .run_split = no_run };
static const struct het_device_i refuse_pool_iface = { .supports_op = any_op, .run_split = no_run,
                                                       .register_pool = refuse_pool };

static void test_registration(het_device *second)
{
    het_error err = { 0 };
    het_pool *pool = make_pool(4u << 20);
    het_device *cpu = het_cpu_device_init(1, &err);
    het_device *ref[2] = { het_device_new(&refuse_mem_iface, HET_DEVICE_VULKAN, "refuser", NULL),
                           het_device_new(&refuse_pool_iface, HET_DEVICE_NPU, "refuser", NULL) };
    if (!pool || !cpu) goto out;
    for (int k = 0; k < 2; k++) {
        het_device *devs[3] = { cpu, second, ref[k] };
        struct het_sched_params sp = { .devices = devs, .n_devices = 3, .pool = pool };
        het_sched *s = het_sched_init(&sp, &err);
        CHECK(s == NULL && err.status == HET_ERR_UNSUPPORTED && strstr(err.msg, "refuser") &&
                  strstr(err.msg, "pool"),
              "a refused import is a clear error: %s", err.msg);
        het_sched_free(s);
        CHECK(!het_device_pool_import(cpu)[0] && !het_device_pool_import(second)[0],
              "the other devices' imports were undone");
    }
    /* two schedulers share the devices and the pool: one import each device */
    het_device *devs[2] = { cpu, second };
    struct het_sched_params sp = { .devices = devs, .n_devices = 2, .pool = pool };
    het_sched *a = het_sched_init(&sp, &err), *b = het_sched_init(&sp, &err);
    CHECK(a && b, "two schedulers on one pool: %s", err.msg);
    het_sched_free(a);
    CHECK(het_device_pool_import(second)[0], "still imported while the second scheduler lives: '%s'",
          het_device_pool_import(second));
    if (b) {
        void *pb = het_pool_base(pool);
        size_t ps = het_pool_size(pool);
        CHECK(het_sched_pool(b) == pool, "het_sched_pool");
        CHECK(het_sched_register_memory(b, (char *)pb + 4096 + 12, 1000, 1, &err) == HET_OK,
              "a region inside the pool needs nothing");
        CHECK(het_sched_register_memory(b, (char *)pb + ps - 10, 100, 1, &err) == HET_ERR_INVALID,
              "past the pool's end: %s", err.msg);
        CHECK(het_sched_register_memory(b, (char *)pb - 4096, 8192, 1, &err) == HET_ERR_INVALID,
              "before the pool's start: %s", err.msg);
    }
    het_sched_free(b);
    CHECK(!het_device_pool_import(second)[0], "unregistered with the last scheduler");
    /* another pool on a device that holds one: refused */
    het_pool *other = make_pool(1u << 20);
    b = het_sched_init(&sp, &err);
    het_device *one[1] = { second };
    struct het_sched_params sp2 = { .devices = one, .n_devices = 1, .pool = other };
    het_sched *c = other ? het_sched_init(&sp2, &err) : NULL;
    CHECK(c == NULL && strstr(err.msg, "another memory pool"), "a second pool on one device: %s", err.msg);
    het_sched_free(c);
    het_sched_free(b);
    het_pool_free(other);
out:
    het_device_free(ref[0]);
    het_device_free(ref[1]);
    het_device_free(cpu);
    het_pool_free(pool);
}

/* ---------------------------------------------------------------------------
 * the pool running out                                                      */

static size_t pool_used(const het_pool *pool)
{
    struct het_pool_stats ps;
    het_pool_get_stats(pool, &ps);
    return ps.used;
}

/* Take everything but `leave` bytes (rounded to the granule). */
static struct het_slice ballast(het_pool *pool, size_t leave)
{
    struct het_pool_stats ps;
    het_pool_get_stats(pool, &ps);
    struct het_slice b = { 0, 0 };
    het_error err = { 0 };
    if (ps.largest_free > leave) CHECK(het_pool_alloc(pool, ps.largest_free - leave, 0, &b, &err) == HET_OK,
                                       "ballast: %s", err.msg);
    return b;
}

static void test_exhausted(const char *path, enum second kind)
{
    if (!het_test_file_exists(path)) return;
    het_error err = { 0 };
    het_device *cpu = NULL, *second = NULL;
    struct run r = { 0 };

    /* the weights do not fit: no model, nothing left in the pool */
    het_pool *tiny = make_pool(1u << 20);
    het_model *m = tiny ? het_model_load_into(path, tiny, &err) : NULL;
    CHECK(m == NULL && err.status == HET_ERR_NOMEM && strstr(err.msg, "weights"), "weights too big: %s", err.msg);
    het_model_free(m);
    if (tiny) CHECK(pool_used(tiny) == 0, "no slice left behind");
    het_pool_free(tiny);

    het_pool *pool = make_pool(16u << 20);
    cpu = het_cpu_device_init(1, &err);
    second = open_second(kind);
    if (!pool || !cpu || !second) goto out;
    r = (struct run){ .devs = { cpu, second }, .n_devs = 2 };
    r.model = het_model_load_into(path, pool, &err);
    CHECK(r.model != NULL, "load: %s", err.msg);
    if (!r.model) goto out;
    struct het_sched_params sp = { .devices = r.devs, .n_devices = 2, .policy = &het_policy_alternate, .pool = pool };
    r.sched = het_sched_init(&sp, &err);
    CHECK(r.sched && het_model_prepare(r.model, r.sched, &err) == HET_OK, "sched: %s", err.msg);
    if (!r.sched) goto close;

    /* the KV cache does not fit (injected, then for real): no context, no slice kept */
    size_t before = pool_used(pool);
    struct het_context_params cp = { .n_ctx = 512, .sched = r.sched, .pool = pool };
    het_pool_set_fault(pool, 0);
    het_context *c = het_context_init(r.model, &cp, &err);
    CHECK(c == NULL && err.status == HET_ERR_NOMEM && strstr(err.msg, "KV"), "KV refused: %s", err.msg);
    het_pool_set_fault(pool, -1);
    struct het_slice b = ballast(pool, 64u << 10);
    c = het_context_init(r.model, &cp, &err);
    CHECK(c == NULL && err.status == HET_ERR_NOMEM, "KV does not fit: %s", err.msg);
    het_pool_release(pool, b, NULL);
    CHECK(pool_used(pool) == before, "failed context inits left nothing (%zu vs %zu)", pool_used(pool), before);

    /* mid-run: a graph whose scratch does not fit fails cleanly, and the run
     * goes on exactly as if it had not been tried */
    r.ctx = het_context_init(r.model, &cp, &err);
    CHECK(r.ctx != NULL, "context: %s", err.msg);
    if (!r.ctx) goto close;
    int32_t a[6], ref[6];
    bool ok = generate(&r, prompt, N_PROMPT, 3, a, &err);
    CHECK(ok, "first tokens: %s", err.msg);
    const int32_t n_past = het_context_n_past(r.ctx);
    b = ballast(pool, 64u << 10);
    int32_t big[400];
    for (int i = 0; i < 400; i++) big[i] = 1 + (i * 37) % 500;
    enum het_status st = het_context_eval(r.ctx, big, 400, false, &err);
    CHECK(st == HET_ERR_NOMEM && strstr(err.msg, "scratch") && strstr(err.msg, "pool"),
          "400-token graph in a full pool: %s", err.msg);
    CHECK(het_context_n_past(r.ctx) == n_past, "no tokens were taken (%d vs %d)", het_context_n_past(r.ctx), n_past);
    /* the same again with fault injection instead of a full pool */
    het_pool_release(pool, b, NULL);
    het_pool_set_fault(pool, 0);
    st = het_context_eval(r.ctx, big, 400, false, &err);
    CHECK(st == HET_ERR_NOMEM && het_context_n_past(r.ctx) == n_past, "injected: %s", err.msg);
    het_pool_set_fault(pool, -1);
    b = ballast(pool, 64u << 10);
    for (int i = 3; ok && i < 6; i++) {   /* continue decoding in the nearly full pool */
        ok = het_context_eval(r.ctx, &a[i - 1], 1, false, &err) == HET_OK;
        if (ok) a[i] = het_argmax(het_context_logits(r.ctx, NULL), het_model_get_config(r.model)->n_vocab);
    }
    CHECK(ok, "decoding after the failure: %s", err.msg);
    het_pool_release(pool, b, NULL);

    /* the reference: the same steps on a fresh context, nothing refused */
    het_context_free(r.ctx);
    r.ctx = het_context_init(r.model, &cp, &err);
    ok = r.ctx && generate(&r, prompt, N_PROMPT, 6, ref, &err);
    CHECK(ok && memcmp(a, ref, sizeof a) == 0, "same tokens as a run without the failures (%s)", err.msg);
close:
    run_close(&r);
out:
    het_device_free(cpu);
    het_device_free(second);
    het_model_free(r.model);
    het_pool_free(pool);
}

/* The CPU's weight panels are its own memory (huge pages), never pool
 * slices: preparing the weights takes nothing from the pool, even one that
 * fails every allocation, and the panels are attached to the weights. */
static void test_panels_out_of_pool(const char *path)
{
    if (!het_test_file_exists(path)) {
        printf("  %s missing: panels out of the pool skipped\n", path);
        return;
    }
    het_error err = { 0 };
    het_pool *pool = make_pool(32u << 20);
    het_device *cpu = het_cpu_device_init(1, &err);
    het_model *m = pool ? het_model_load_into(path, pool, &err) : NULL;
    CHECK(m != NULL, "load: %s", err.msg);
    struct het_sched_params sp = { .devices = &cpu, .n_devices = 1, .pool = pool };
    het_sched *s = m && cpu ? het_sched_init(&sp, &err) : NULL;
    if (s) {
        size_t before = pool_used(pool);
        het_pool_set_fault(pool, 1);
        CHECK(het_model_prepare(m, s, &err) == HET_OK, "prepare beside a pool that fails: %s", err.msg);
        het_pool_set_fault(pool, -1);
        CHECK(pool_used(pool) == before, "no panel went to the pool (%zu -> %zu bytes)", before, pool_used(pool));
        int packed = 0;
        for (int i = 0; i < het_model_n_weights(m); i++) packed += het_model_weight(m, i)->extra != NULL;
        CHECK(packed > 0, "weights were repacked (%d)", packed);
    }
    het_sched_free(s);
    het_device_free(cpu);
    het_model_free(m);
    if (pool) CHECK(pool_used(pool) == 0, "nothing left in the pool (%zu)", pool_used(pool));
    het_pool_free(pool);
}

/* Is the page holding byte p of a mapping resident? */
static bool page_resident(const void *p)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    unsigned char v = 0;
    if (mincore((void *)((uintptr_t)p & ~(page - 1)), 1, &v) != 0) return false;
    return v & 1;
}

/* A KV cache in the pool is fresh memfd memory: before a step writes into
 * it, the pages of the next 256 positions of every head are made resident
 * at once (context.c), and not the whole cache. Head dim 16 (F16): 32 bytes
 * a position, so position 200 lies a page past what 6 tokens write, and 400
 * past the 256 made resident. */
static void test_kv_resident(const char *path)
{
    if (!het_test_file_exists(path)) {
        printf("  %s missing: KV residency skipped\n", path);
        return;
    }
    het_error err = { 0 };
    het_pool *pool = make_pool(64u << 20);
    het_device *cpu = het_cpu_device_init(1, &err);
    struct run r = { .devs = { cpu }, .n_devs = 1 };
    bool ok = pool && cpu && run_open(&r, path, pool, &het_policy_first, &err);
    CHECK(ok, "pooled run: %s", err.msg);
    ok = ok && het_context_eval(r.ctx, prompt, N_PROMPT, false, &err) == HET_OK;
    CHECK(ok, "eval: %s", err.msg);
    const het_graph *g = ok ? het_sched_last_graph(r.sched) : NULL;
    const struct het_tensor *seen[8];
    int caches = 0, near = 0, far = 0, regions = 0;
    for (int i = 0; g && i < het_graph_n_tensors(g); i++) {
        const struct het_tensor *t = het_graph_tensor(g, i);
        for (int k = -1; k < HET_MAX_SRC; k++) {
            const struct het_tensor *x = k < 0 ? t : t->src[k];
            if (!x || x->op != HET_OP_NONE || (strcmp(x->name, "cache_k") && strcmp(x->name, "cache_v"))) continue;
            if (x->ne[1] < 512 || x->nb[1] != 32) continue; /* the whole cache, as context.c lays it out */
            bool again = false;
            for (int j = 0; j < caches; j++) again |= seen[j] == x;
            if (again || caches == 8) continue;
            seen[caches++] = x;
            for (int64_t l = 0; l < x->ne[3]; l++)
                for (int64_t h = 0; h < x->ne[2]; h++) {
                    const char *row0 = (const char *)x->data + l * x->nb[3] + h * x->nb[2];
                    regions++;
                    near += page_resident(row0 + 200 * x->nb[1]);
                    far += page_resident(row0 + 400 * x->nb[1]);
                }
        }
    }
    CHECK(caches >= 2 && regions > 0, "found the K and V caches in the graph (%d tensors, %d head regions)", caches,
          regions);
    CHECK(near == regions, "position 200 resident in %d of %d head regions after 6 tokens", near, regions);
    CHECK(far == 0, "position 400 resident in %d of %d head regions: the whole cache was committed", far, regions);
    printf("  KV pages: position 200 resident in %d/%d head regions, position 400 in %d\n", near, regions, far);
    run_close(&r);
    het_device_free(cpu);
    het_model_free(r.model);
    het_pool_free(pool);
}

int main(void)
{
    het_test_seed(42);
    const char *model = het_test_shared("models/stories260K.gguf");
    char path[4096];
    snprintf(path, sizeof path, "%s", model);
    het_error err = { 0 };
    het_device *vk = open_vulkan(false);
    het_device *second = vk;
    if (!vk) {
        printf("no Vulkan device: Vulkan parts skipped, a second CPU device stands in\n");
        second = het_cpu_device_init(1, &err);
    }
    printf("model split across CPU and %s\n", het_device_name(second));
    test_model_split(path);
    printf("hand-off through the same pages\n");
    test_handoff(second, false);
    if (vk) {
        het_device *mirror = open_vulkan(true);
        CHECK(mirror != NULL, "Vulkan without import");
        if (mirror) test_handoff(mirror, true);
        het_device_free(mirror);
    }
    printf("registration\n");
    test_registration(second);
    printf("pool exhausted\n");
    test_exhausted(path, vk ? SECOND_VULKAN : SECOND_CPU);
    test_panels_out_of_pool(het_test_shared("models/synthetic/llama-tiny-q4_0.gguf"));
    printf("KV cache pages\n");
    test_kv_resident(het_test_shared("models/synthetic/llama-tiny-q4_0.gguf"));
    het_device_free(second);
    return het_test_finish();
}
