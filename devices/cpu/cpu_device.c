/*
 * cpu_device.c — the CPU as a het device.
 *
 * A split runs as one job of the device's thread pool (cpu_pool.c): the
 * calling thread and every worker that wakes in time walk the split's nodes
 * and take parts of each kernel's steps from a shared counter until none is
 * left; a node's last step is over when all its parts are done, which is
 * all that orders it before the next node (cpu_sync.c says why this beats a
 * static split and a barrier on a busy machine, cpu_pool.c why a pool and
 * not an OpenMP region). A worker that joins late starts at the node the
 * caller is in. Two kinds of node run together, to pay fewer step ends (a
 * decode token has a few hundred): matmuls that share one activation row
 * (het_cpu_mul_mat_group), and a run of small nodes, as one step whose
 * parts are its chains that share no memory, each run by one thread alone
 * (HET_CPU_SOLO_MAX_BYTES, cpu_solo.c). The thread count (the caller
 * included) defaults to the number of physical cores (hwloc), since SMT
 * siblings share the SIMD units the kernels saturate.
 *
 * Matmul weights are repacked once at load into panels (3-D expert tensors
 * one block per expert, only when their file pages can go). The panels are
 * the CPU's own layout, which no other device reads: they live in private
 * memory with huge pages (panel_arena.c says why), not in the memory pool.
 */
#include "devices/cpu/cpu_ops.h"
#include "devices/cpu/cpu_pool.h"
#include "devices/cpu/cpu_profile.h"
#include "devices/cpu/cpu_solo.h"
#include "devices/cpu/cpu_stream.h"
#include "devices/cpu/panel_arena.h"
#include "devices/cpu/quant_dot.h"
#include "het/pool.h"
#include "sched/clock.h"
#include "sched/device_impl.h"

#include <hwloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Mean bytes per node (het_cpu_node_work) from which a split's nodes are
 * shared between threads: below it, handing out parts and moving their data
 * between cores costs about what the second thread saves. Measured on
 * stories260K (2 threads, Zen 4, with OpenMP regions then): decode (~14 KB
 * per node) ran 1.8x faster on one thread, and beside two busy loops it no
 * longer waited for a second thread to be scheduled at every token; its pp64
 * (~190 KB per node) is faster on two. */
#define HET_CPU_SHARE_MIN_BYTES (64u << 10)
/* In a shared split, a run of nodes that each touch fewer bytes than this
 * (decode's norms, element-wise ops, rope, cache writes: a few KB each) is
 * one step, each part of it a chain of the run that shares no memory with
 * the others (cpu_solo.c), run alone by the thread that takes it: the
 * threads wait for one step end instead of one per node, and no node's few
 * KB move between cores in pieces. */
#define HET_CPU_SOLO_MAX_BYTES (64u << 10)
/* A thread waiting for a step to end asks for the first bytes of the next
 * decode matmul's weights (cpu_sync.c): at most this many (a part of a
 * decode step is at most 1 MB; L2 holds 1-2 MB), from the first matmul
 * within this many nodes. */
#define HET_CPU_AHEAD_MAX  ((size_t)256 << 10)
#define HET_CPU_AHEAD_SCAN 16
/* cpu_expect_run wakes the workers only if a split ended this recently. */
#define HET_CPU_EXPECT_US 20000.0

/* A matmul's scratch need, remembered per weight and activation shape:
 * het_cpu_mul_mat_work_size plans the node at every kernel level and thread
 * count (8 plans with 2 threads), and a decode token asks it for each of its
 * ~200 matmuls. The key is everything the plan reads of the node (the weight
 * by identity, its panels included, and the shapes, types and element
 * strides), so a hit is the value the call would return; the device's
 * thread count never changes, and a change of f32 activations or of the
 * weights' panels empties the memo. */
#define CPU_WS_BITS  10
#define CPU_WS_PROBE 8 /* slots looked at from a key's own */
#define CPU_WS_SLOTS (1 << CPU_WS_BITS)
#define CPU_WS_ASK_AHEAD 6 /* nodes ahead whose slots a split's first loop asks for (cpu_ws_ask) */
struct cpu_ws_memo {
    const struct het_tensor *a;       /* NULL: empty slot */
    const void              *a_extra;
    int64_t                  a_ne[HET_MAX_DIMS], b_ne[HET_MAX_DIMS], d_ne[HET_MAX_DIMS];
    size_t                   a_nb0, b_nb0;
    enum het_type            a_type, b_type, d_type;
    enum het_op              b_op;    /* a SWIGLU b may be made by the matmul: more scratch */
    bool                     has_data;
    size_t                   need;
};

/* A moving node as kept: its index, what of it may move (cpu_node_geometry)
 * and what was decided from that (scratch bytes, work, its small-run flag
 * after the fused runs were made whole). */
struct cpu_kept_node {
    int      i;
    uint64_t geometry;
    size_t   need, work;
    uint8_t  solo;
};

/* What of a split's decisions (its cpu_split_state's node_buf) holds for
 * the split's next run under the same storage layout (het_device.layout).
 * Under one layout only views move or change extent, so only a node that
 * is a view or reads or writes one can change ("moving": a decode graph's reshapes, its
 * attention and cache writes); of those, the ones whose views or op params
 * did change since (cpu_node_geometry: the attention and the cache writes,
 * 84 of a Qwen3-0.6B token's 648 nodes) are decided again, with the fused
 * runs that look at them and the runs of small nodes that hold them. A
 * decode token's decisions took 45-90 us of host time made anew, most of it
 * misses on metadata the weights' stream had pushed out; kept, 19-33 us
 * (Zen 5, two threads; bench/README.md, session 29). */
struct cpu_kept {
    uint64_t                  layout;     /* 0: nothing kept                          */
    size_t                    need, work; /* over the nodes that do not move           */
    struct cpu_kept_node     *moved;      /* the moving nodes, in order                */
    int                       n_moved;
    int                      *fused;      /* start, length of each fused run that holds */
    int                       n_fused;    /* or looks at a moving node                 */
    int                      *runs;       /* [start, end) of each run of small nodes   */
    int                       n_runs;     /* holding one                               */
    int                      *changed;    /* scratch: the moving nodes that changed    */
    int                       cap;        /* of each array (pairs for fused and runs)  */
};

/* One split's decisions, per node, made by the caller before its threads
 * start (one block, node_buf), and what of them is kept for the split's
 * next run. The device keeps up to CPU_SPLITS_KEPT splits' (a plan that
 * gives the CPU several splits a token, beside another device, runs them
 * in turn: ~30-80 a token for a layer's node or an MoE's experts pinned
 * elsewhere): a split is found again by its node list, looked for first
 * after the one run last (the splits of a token come in the same order
 * every token); past that many, the least recently run gives way. */
struct cpu_split_state {
    const uint8_t **ahead;      /* weights to fetch while waiting in its step,      */
    size_t         *ahead_len;  /* their bytes a thread (cpu_set_ahead; 0: none),   */
    size_t         *ahead_step; /* and from one thread's to the next's              */
    uint8_t        *solo;       /* cpu_node_is_solo,                                */
    uint8_t        *solo_part;  /* its part of its run (het_cpu_solo_partition),    */
    uint8_t        *solo_np;    /* at a run's first node: the run's parts           */
    void           *node_buf;
    int             cap_nodes;
    bool            ahead_set;  /* ahead* found for the nodes decided last              */
    /* the kept decisions' matmul steps planned ahead (cpu_plan_steps): per
     * node, the step planned to start there (NULL: none), in step_pool */
    const struct het_cpu_mm_step **step;
    unsigned char  *step_pool;
    int             cap_step_nodes, cap_steps;
    bool            steps_set;  /* planned for the nodes decided last               */
    struct cpu_kept kept;       /* what of node_buf holds for the next run              */
    struct het_tensor *const *nodes; /* the split whose state this is (its node list),  */
    int             n;               /* and its length                                  */
    uint64_t        last_run;   /* the device's split count when it last ran            */
    double          stream_bytes; /* decode weights its matmuls stream, and their most     */
    int64_t         stream_rows;  /* rows (cpu_stream_bytes; again when a node moved)       */
};

#define CPU_SPLITS_KEPT 256

struct cpu_context {
    int                     n_threads;
    struct het_cpu_features features;
    enum het_cpu_isa        isa;
    bool                    f32_act;    /* matmul activations stay F32 (exact, slower) */
    size_t                  l2_bytes;   /* a core's L2, 0: not known (het_compute_params) */
    void                   *wdata;      /* per-node scratch, grown on demand */
    size_t                  wsize;
    struct het_tensor     **packed_t;   /* weights whose t->extra we own      */
    double                  last_split_us; /* when the last shared split ended (het_now_us; cpu_expect_run) */
    void                  **packed;     /* load-time weight panels (t->extra) */
    struct het_panel_arena **packed_in; /* the arena each panel was taken from */
    int                     n_packed, cap_packed;
    size_t                  packed_bytes;
    struct het_cpu_profile *profile;    /* HET_CPU_PROFILE set: per-node times */
    het_cpu_pool           *threads;    /* n_threads - 1 workers                */
    unsigned                node_key;   /* keys handed to gated nodes so far    */
    struct cpu_split_state *splits;     /* n_splits of them, room for cap_splits */
    int                     n_splits, cap_splits;
    int                     split_next; /* where to look first: after the one run last */
    uint64_t                n_runs;     /* splits run so far (cpu_split_state.last_run) */
    struct het_cpu_stream_choice stream; /* how decode's weight stream asks ahead (cpu_stream.c) */
    struct cpu_ws_memo      ws_memo[CPU_WS_SLOTS];
};

/* Physical cores (at least 1) and a core's L2 bytes (0: not known). */
static void cpu_topology(int *cores, size_t *l2)
{
    hwloc_topology_t topo;
    int n = 0;
    *l2 = 0;
    if (hwloc_topology_init(&topo) == 0) {
        if (hwloc_topology_load(topo) == 0) {
            n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
            const hwloc_obj_t c2 = hwloc_get_obj_by_type(topo, HWLOC_OBJ_L2CACHE, 0);
            if (c2 && c2->attr) *l2 = (size_t)c2->attr->cache.size;
        }
        hwloc_topology_destroy(topo);
    }
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    *cores = n > 0 ? n : 1;
}

size_t het_cpu_l2_bytes(void)
{
    int cores;
    size_t l2;
    cpu_topology(&cores, &l2);
    return l2;
}

static bool cpu_supports_op(het_device *dev, const struct het_tensor *node)
{
    return het_cpu_supports(node);
}

static enum het_status ensure_wdata(struct cpu_context *c, size_t need, het_error *err)
{
    if (need <= c->wsize) return HET_OK;
    need = (need + 4095) & ~(size_t)4095;
    void *p = aligned_alloc(64, need);
    if (!p) return het_error_set(err, HET_ERR_NOMEM, "cpu: cannot allocate %zu bytes of kernel scratch", need);
    free(c->wdata);
    c->wdata = p;
    c->wsize = need;
    return HET_OK;
}

static void cpu_ws_key(struct cpu_ws_memo *k, const struct het_tensor *node)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1];
    memset(k, 0, sizeof *k);
    k->a = a;
    k->a_extra = a->extra;
    memcpy(k->a_ne, a->ne, sizeof k->a_ne);
    memcpy(k->b_ne, b->ne, sizeof k->b_ne);
    memcpy(k->d_ne, node->ne, sizeof k->d_ne);
    k->a_nb0 = a->nb[0];
    k->b_nb0 = b->nb[0];
    k->a_type = a->type;
    k->b_type = b->type;
    k->d_type = node->type;
    k->b_op = b->op;
    k->has_data = a->data && b->data && node->data;
}

static bool cpu_ws_same(const struct cpu_ws_memo *x, const struct cpu_ws_memo *y)
{
    return x->a == y->a && x->a_extra == y->a_extra && !memcmp(x->a_ne, y->a_ne, sizeof x->a_ne) &&
           !memcmp(x->b_ne, y->b_ne, sizeof x->b_ne) && !memcmp(x->d_ne, y->d_ne, sizeof x->d_ne) &&
           x->a_nb0 == y->a_nb0 && x->b_nb0 == y->b_nb0 && x->a_type == y->a_type && x->b_type == y->b_type &&
           x->d_type == y->d_type && x->b_op == y->b_op && x->has_data == y->has_data;
}

/* The memo slot where a matmul node's key starts looking. */
static size_t cpu_ws_home(const struct het_tensor *node)
{
    const struct het_tensor *a = node->src[0], *b = node->src[1];
    const uint64_t h = ((uint64_t)(uintptr_t)a ^ (uint64_t)b->ne[1] << 40 ^ (uint64_t)b->ne[2] << 52) *
                       0x9E3779B97F4A7C15ull;
    return (size_t)(h >> (64 - CPU_WS_BITS));
}

/* Ask for the memo slots a matmul node will look at. A token's first look
 * at the memo finds it out of the caches (its weights streamed through them
 * since): asked for a few nodes ahead, the misses overlap. */
static void cpu_ws_ask(const struct cpu_context *c, const struct het_tensor *node)
{
    if (node->op != HET_OP_MUL_MAT || !node->src[0] || !node->src[1]) return;
    const struct cpu_ws_memo *m = &c->ws_memo[cpu_ws_home(node)];
    for (size_t o = 0; o < sizeof *m; o += 64) __builtin_prefetch((const char *)m + o);
    __builtin_prefetch((const char *)m + sizeof *m - 1); /* the slot's last line when it straddles one more */
}

/* het_cpu_work_size, a matmul's from the memo when it was asked before. */
static size_t cpu_work_size(struct cpu_context *c, const struct het_tensor *node)
{
    if (node->op != HET_OP_MUL_MAT || !node->src[0] || !node->src[1])
        return het_cpu_work_size(node, c->n_threads, c->f32_act, c->l2_bytes);
    struct cpu_ws_memo k;
    cpu_ws_key(&k, node);
    const size_t home = cpu_ws_home(node);
    struct cpu_ws_memo *slot = &c->ws_memo[home];
    for (int i = 0; i < CPU_WS_PROBE; i++) {
        struct cpu_ws_memo *m = &c->ws_memo[(home + (size_t)i) % CPU_WS_SLOTS];
        if (!m->a) { slot = m; break; } /* not there: it goes in the first free slot */
        if (cpu_ws_same(m, &k)) return m->need;
    }
    k.need = het_cpu_work_size(node, c->n_threads, c->f32_act, c->l2_bytes);
    *slot = k; /* (the key's own slot when every one looked at was taken) */
    return k.need;
}

/* A node whose steps depend on data its own parts wrote (het_cpu_sync_all
 * at its end): entered through the gate (het_cpu_node_enter). */
static bool node_is_gated(const struct het_tensor *t) { return t->op == HET_OP_MUL_MAT_ID; }

/* One split as a pool job (shared by every thread that runs it). The
 * fields the threads read at every node come first, and nothing writes
 * them while the job runs; those written meanwhile (`at` by the caller at
 * every node) start a cache line of their own. With `at` beside `n`, a
 * worker on another CCD than the caller missed on the line at every node. */
struct cpu_split_job {
    struct cpu_context       *c;
    struct het_tensor *const *nodes;
    const uint8_t *const     *ahead;   /* cpu_context's per-node decisions      */
    const size_t             *ahead_len, *ahead_step;
    const uint8_t            *solo, *solo_part, *solo_np;
    const struct het_cpu_mm_step *const *steps; /* planned ahead (NULL: none) */
    int                       n;
    unsigned                  key0;    /* gate key of node i: key0 + i        */
    enum het_cpu_stream       stream;  /* how the split's decode runs ask ahead */
    _Alignas(64) _Atomic uint64_t at;  /* node the caller is in << 32 | its first step */
    _Atomic uint64_t          solo_failed; /* first failed node of a solo run << 32 | its
                                              status (any thread), or UINT64_MAX */
    int                       failed;  /* caller only: first failed node, or -1 */
    enum het_status           failed_st;
    double                    t_nodes; /* caller only: profiled node time     */
    uint64_t                  n_steps_kept; /* caller only: steps run on plans made ahead */
    int64_t                   handoff_ns; /* caller only: its waits' hand-off   */
    int                       handoff_n;  /* (het_cpu_worker)                   */
};

/* Bytes a node's tensors hold (elements, not strides: a view of the KV
 * cache counts what it covers, not the cache's extent). */
static size_t cpu_node_dense_bytes(const struct het_tensor *t)
{
    size_t bytes = 0;
    for (int i = -1; i < HET_MAX_SRC; i++) {
        const struct het_tensor *x = i < 0 ? t : t->src[i];
        if (!x) break;
        const struct het_type_traits *tr = het_type_get_traits(x->type);
        bytes += tr ? (size_t)het_nelements(x) / (size_t)tr->blck_size * tr->type_size : 0;
    }
    return bytes;
}

static bool cpu_node_is_solo(const struct het_tensor *t)
{
    return !node_is_gated(t) && cpu_node_dense_bytes(t) < HET_CPU_SOLO_MAX_BYTES;
}

/* The first node of a small run to fail, kept. */
static void cpu_solo_failed(struct cpu_split_job *j, int x, enum het_status s)
{
    uint64_t none = UINT64_MAX;
    atomic_compare_exchange_strong(&j->solo_failed, &none, (uint64_t)x << 32 | (uint32_t)s);
}

/* What every node of c runs with as thread ith of nth: the device's
 * scratch, kernel level, activation form and L2, and how decode's weight
 * runs ask ahead (the caller sets the worker, when there is one). */
static struct het_compute_params cpu_params(const struct cpu_context *c, int ith, int nth,
                                            enum het_cpu_stream stream)
{
    return (struct het_compute_params){
        .ith = ith, .nth = nth, .wdata = c->wdata, .wsize = c->wsize, .isa = c->isa, .f32_act = c->f32_act,
        .stream = stream, .l2_bytes = c->l2_bytes,
    };
}

/* Nodes [i, e) as one step whose parts are the run's groups of nodes that
 * share no data (het_cpu_solo_partition; often one), each run by whichever
 * thread takes it as if it were alone (nth 1, thread 0's scratch: a run cut
 * into several parts has no node that uses scratch). */
static void cpu_run_solo(struct cpu_split_job *j, const struct het_compute_params *p, int i, int e)
{
    const int64_t np = j->solo_np[i];
    for (int64_t k = het_cpu_part_first(p, np); k < np; k = het_cpu_part_next(p, np, k)) {
        /* (the solo runs have always asked with NTA, the hint's zero value) */
        const struct het_compute_params solo = cpu_params(j->c, 0, 1, HET_CPU_STREAM_NTA);
        for (int x = i, used; x < e; x += used) {
            used = 1;
            if (j->solo_part[x] != k) continue;
            /* a chain's nodes share memory, so they are all in this part */
            enum het_status s;
            used = het_cpu_norm_chain(&solo, j->nodes + x, e - x, &s);
            if (used == 0) {
                used = 1;
                s = het_cpu_compute(&solo, j->nodes[x]);
            }
            if (s == HET_OK) continue;
            cpu_solo_failed(j, x, s);
            break;
        }
    }
}

/* The runs of a step, one per thread up to HET_CPU_SYNC_RUNS (cpu_sync.c):
 * thread ith streams run ith % cpu_runs first. */
static int cpu_runs(const struct cpu_context *c)
{
    return c->n_threads < HET_CPU_SYNC_RUNS ? c->n_threads : HET_CPU_SYNC_RUNS;
}

/* What a thread may fetch ahead while it waits in the step of each node
 * (see cpu_sync.c): the weights of the next decode matmul, skipping those
 * that read the node's input (a group of matmuls on one input is one step),
 * each thread the start of its own run of them (thread r: ahead + r *
 * ahead_step), which it streams first once that matmul's step opens.
 * (Every thread asking for thread 0's start measured faster before the
 * weights streamed with NTA hints; since, each its own took 0.990-1.002x
 * the token time on two CCDs, 0.990-1.001x on one: bench/README.md,
 * session 28.)
 * Found once per split by the caller; a matmul's weights are looked up once
 * however many nodes name them. */
static void cpu_set_ahead(const struct cpu_context *c, struct cpu_split_state *s, struct het_tensor *const *nodes, int n)
{
    int last = -1;
    const uint8_t *base = NULL;
    size_t len = 0, step = 0;
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = nodes[i];
        s->ahead[i] = NULL;
        s->ahead_len[i] = 0;
        s->ahead_step[i] = 0;
        /* a run fused into a matmul (a residual norm, a swiglu) is that
         * matmul's step; no other run ends in one (het_cpu_fused_len) */
        const int fused = t->op == HET_OP_ADD || t->op == HET_OP_SWIGLU ? het_cpu_fused_len(nodes + i, n - i) : 1;
        if (nodes[i + fused - 1]->op == HET_OP_MUL_MAT) t = nodes[i + fused - 1];
        for (int x = i + fused; x < n && x <= i + HET_CPU_AHEAD_SCAN; x++) {
            const struct het_tensor *m = nodes[x];
            if (m->op != HET_OP_MUL_MAT || (t->op == HET_OP_MUL_MAT && m->src[1] == t->src[1])) continue;
            if (x != last) {
                last = x;
                len = het_cpu_mul_mat_ahead(m, cpu_runs(c), &base, &step);
            }
            s->ahead[i] = base;
            s->ahead_len[i] = len < HET_CPU_AHEAD_MAX ? len : HET_CPU_AHEAD_MAX;
            s->ahead_step[i] = step;
            break;
        }
    }
}

/* Room for n nodes' decisions (their values are made anew each split). */
static enum het_status cpu_nodes_reserve(struct cpu_split_state *s, int n, het_error *err)
{
    if (n <= s->cap_nodes) return HET_OK;
    s->kept.layout = 0;
    const size_t per = sizeof *s->ahead + sizeof *s->ahead_len + sizeof *s->ahead_step + 3;
    void *buf = realloc(s->node_buf, per * (size_t)n);
    if (!buf) return het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory for a split of %d nodes", n);
    s->node_buf = buf;
    s->cap_nodes = n;
    s->ahead = buf;
    s->ahead_len = (size_t *)(void *)(s->ahead + n);
    s->ahead_step = s->ahead_len + n;
    s->solo = (uint8_t *)(s->ahead_step + n);
    s->solo_part = s->solo + n;
    s->solo_np = s->solo_part + n;
    return HET_OK;
}

/* The caller walks every node; a worker starts where the caller is (the
 * steps before are over) and leaves at the end, or at a gated node it may
 * not enter. Statuses are the same on every thread (every thread takes the
 * same decisions), so the caller's are the split's. */
static void cpu_split_run(void *arg, struct het_cpu_worker *w, int ith)
{
    struct cpu_split_job *j = arg;
    const struct cpu_context *c = j->c;
    int i = 0;
    if (ith == 0) {
        w->step = (unsigned)atomic_load_explicit(&j->at, memory_order_relaxed);
    } else {
        const uint64_t at = atomic_load_explicit(&j->at, memory_order_acquire);
        i = (int)(at >> 32);
        w->step = (unsigned)at;
    }
    struct het_compute_params p = cpu_params(c, ith, c->n_threads, j->stream);
    p.worker = w;
    /* the split's own hand-off measure (cpu_stream.c; the caller's is read at the end) */
    w->handoff_ns = INT64_MAX;
    w->handoff_n = 0;
    struct het_cpu_profile *prof = ith == 0 ? c->profile : NULL;
    double t0 = prof ? het_cpu_profile_now_us(prof) : 0.0;
    /* the job's read-only fields, once (kept in registers across the calls) */
    struct het_tensor *const *nodes = j->nodes;
    const uint8_t *const *ahead = j->ahead;
    const size_t *ahead_len = j->ahead_len, *ahead_step = j->ahead_step;
    const uint8_t *solo = j->solo;
    const struct het_cpu_mm_step *const *steps = j->steps;
    const int n = j->n, run = ith % cpu_runs(c);
    for (int used; i < n; i += used) {
        struct het_tensor *t = nodes[i];
        if (ith == 0) atomic_store_explicit(&j->at, (uint64_t)i << 32 | w->step, memory_order_release);
        if (node_is_gated(t) && !het_cpu_node_enter(&p, j->key0 + (unsigned)i)) return;
        enum het_status s = HET_OK;
        w->ahead = ahead[i] ? ahead[i] + (size_t)run * ahead_step[i] : NULL;
        w->ahead_left = ahead_len[i];
        if (solo[i]) {
            used = 1;
            while (i + used < n && solo[i + used]) used++;
            cpu_run_solo(j, &p, i, i + used);
        } else if (steps && steps[i]) {
            used = het_cpu_mm_step_run(&p, steps[i], &s);
            if (ith == 0) j->n_steps_kept++;
        } else {
            used = het_cpu_compute_nodes(&p, nodes + i, n - i, &s);
        }
        if (ith != 0) continue;
        if (s != HET_OK && j->failed < 0) {
            j->failed = i;
            j->failed_st = s;
        }
        if (prof) {
            const double t1 = het_cpu_profile_now_us(prof);
            het_cpu_profile_add(prof, j->nodes + i, used, t1 - t0);
            j->t_nodes += t1 - t0;
            t0 = t1;
        }
    }
    if (ith == 0) {
        j->handoff_ns = w->handoff_ns;
        j->handoff_n = w->handoff_n;
    }
}

/* Does node t move with the views (a view itself, or reading or writing
 * one: het_device.layout)? */
static bool cpu_node_moves(const struct het_tensor *t)
{
    if (t->view_src) return true;
    for (int k = 0; k < HET_MAX_SRC; k++)
        if (t->src[k] && t->src[k]->view_src) return true;
    return false;
}

/* Parts of the run of small nodes [i, e). */
static void cpu_part_run(const struct cpu_context *c, struct cpu_split_state *s, struct het_tensor *const *nodes, int i,
                         int e)
{
    s->solo_np[i] = (uint8_t)het_cpu_solo_partition(nodes + i, e - i, c->n_threads, s->solo_part + i);
    /* the same parts hold for any tail of the run, where a group of nodes
     * run together before it may leave the walk */
    for (int x = i + 1; x < e; x++) s->solo_np[x] = s->solo_np[i];
}

/* Nodes that run as one fused pass, [i, i + len), are all in a small run
 * or all not (a run's parts are found from its first node). */
static void cpu_whole_run(struct cpu_split_state *s, int i, int len)
{
    bool all = true;
    for (int x = i; x < i + len; x++) all = all && s->solo[x];
    for (int x = i; x < i + len && !all; x++) s->solo[x] = 0;
}

/* How many nodes from its first het_cpu_fused_len looks at (a residual
 * norm's first node: the norm and the matmuls that read it); kept in step
 * with it (cpu_dispatch.c). */
static int cpu_fuse_look(const struct het_tensor *t)
{
    switch (t->op) {
    case HET_OP_ADD:      return 3 + HET_CPU_MM_GROUP_MAX;
    case HET_OP_RMS_NORM: return 3;
    case HET_OP_SWIGLU:   return 2;
    default:              return 1;
    }
}

/* One word into a running hash, every bit of it reaching every bit of the
 * hash (a multiply carries upwards only; the shift brings it back down), so
 * that two changes cannot cancel but by chance (1 in 2^64). */
static uint64_t cpu_mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* What of a moving node may change under one layout: its op params, and
 * the place and shape of it and of its sources where they are views. */
static uint64_t cpu_node_geometry(const struct het_tensor *t)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < HET_MAX_OP_PARAMS; i++) h = cpu_mix(h, (uint32_t)t->op_params[i]);
    for (int k = -1; k < HET_MAX_SRC; k++) {
        const struct het_tensor *x = k < 0 ? t : t->src[k];
        if (!x || !x->view_src) continue;
        for (int d = 0; d < HET_MAX_DIMS; d++) h = cpu_mix(cpu_mix(h, (uint64_t)x->ne[d]), (uint64_t)x->nb[d]);
        h = cpu_mix(cpu_mix(h, (uint64_t)x->view_offs), (uint64_t)(uintptr_t)x->data);
    }
    return h;
}

static bool cpu_kept_room(struct cpu_kept *k, int n)
{
    if (n <= k->cap) return true;
    const size_t un = (size_t)n;
    struct cpu_kept_node *moved = realloc(k->moved, sizeof *moved * un);
    if (moved) k->moved = moved;
    int *runs = realloc(k->runs, sizeof *runs * 2 * un);
    if (runs) k->runs = runs;
    int *fused = realloc(k->fused, sizeof *fused * 2 * un);
    if (fused) k->fused = fused;
    int *changed = realloc(k->changed, sizeof *changed * un);
    if (changed) k->changed = changed;
    if (!moved || !runs || !fused || !changed) return false;
    k->cap = n;
    return true;
}

/* Bytes of weights the split's decode matmuls stream (at most 4 rows of
 * activations: runs of load-time panels, whose hint cpu_stream.c races),
 * the measure its time is taken per, and the most rows they have (*rows:
 * splits with other rows are not raced against each other); 0 where any
 * weight matmul has more rows (a prefill: its output matrix streams for
 * the last row alone, but its time is the other matmuls' arithmetic, and
 * timed it made whichever hint it ran with lose its race: tg128 at 45-52%
 * of the read in one of three fresh processes), and 0 for a split that
 * holds a probe (a node run to time it: calibration ran the same matmul
 * over and over, its weights in the caches, and on the Xeon won the race
 * for T0 on every model's first run, its decode then at 62% of the read
 * instead of 78%). */
static double cpu_stream_bytes(struct het_tensor *const *nodes, int n, int64_t *rows)
{
    double b = 0;
    *rows = 0;
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = nodes[i];
        if (t->flags & HET_TENSOR_FLAG_PROBE) return 0;
        if (t->op != HET_OP_MUL_MAT || !(t->src[0]->flags & HET_TENSOR_FLAG_WEIGHT)) continue;
        const int64_t m = t->src[1]->ne[1] * t->src[1]->ne[2] * t->src[1]->ne[3];
        if (m > 4) return 0;
        if (m > *rows) *rows = m;
        b += (double)het_nbytes(t->src[0]);
    }
    return b;
}

/* Every decision about nodes[0..n) made anew (*need: scratch bytes, *work:
 * the nodes' work), and kept under a nonzero layout for the next run, with
 * what may have to be decided again then: the moving nodes (cpu_node_moves;
 * every node fused with one is counted with them), the fused runs whose
 * first node looks at a moving one (cpu_fuse_look), and the runs of small
 * nodes that hold one. Not kept where a moving node is a matmul of weights
 * that are a view (the nodes before it fetch them ahead: cpu_set_ahead).
 * solo_part and solo_np are scratch here until the small runs are parted. */
static void cpu_decide(struct cpu_context *c, struct cpu_split_state *s, uint64_t layout, struct het_tensor *const *nodes, int n, size_t *need,
                       size_t *work)
{
    struct cpu_kept *k = &s->kept;
    bool keep = layout && cpu_kept_room(k, n);
    k->layout = 0;
    k->n_moved = k->n_runs = k->n_fused = 0;
    k->need = k->work = 0;
    *need = *work = 0;
    uint8_t *moves = s->solo_part, *len = s->solo_np;
    for (int i = 0; i < n; i++) moves[i] = keep && cpu_node_moves(nodes[i]);
    for (int i = 0, l; i < n; i += l) {
        l = het_cpu_fused_len(nodes + i, n - i);
        len[i] = (uint8_t)l;
        if (!keep) continue;
        bool any = false, near = false;
        for (int x = i; x < i + l; x++) any = any || moves[x];
        for (int x = i; x < n && x < i + cpu_fuse_look(nodes[i]); x++) near = near || moves[x];
        for (int x = i; x < i + l && any; x++) moves[x] = 1;
        if (!near && !any) continue;
        k->fused[2 * k->n_fused] = i;
        k->fused[2 * k->n_fused + 1] = l;
        k->n_fused++;
    }
    for (int i = 0; i < CPU_WS_ASK_AHEAD && i < n; i++) cpu_ws_ask(c, nodes[i]);
    for (int i = 0; i < n; i++) {
        if (i + CPU_WS_ASK_AHEAD < n) cpu_ws_ask(c, nodes[i + CPU_WS_ASK_AHEAD]);
        const size_t w = cpu_work_size(c, nodes[i]), nw = het_cpu_node_work(nodes[i]);
        if (w > *need) *need = w;
        *work += nw;
        s->solo[i] = cpu_node_is_solo(nodes[i]);
        if (!keep) continue;
        if (!moves[i]) {
            if (w > k->need) k->need = w;
            k->work += nw;
            continue;
        }
        if (nodes[i]->op == HET_OP_MUL_MAT && nodes[i]->src[0]->view_src) keep = false;
        k->moved[k->n_moved++] = (struct cpu_kept_node){ i, cpu_node_geometry(nodes[i]), w, nw, 0 };
    }
    for (int i = 0; i < n; i += len[i]) cpu_whole_run(s, i, len[i]);
    s->stream_bytes = cpu_stream_bytes(nodes, n, &s->stream_rows);
    for (int m = 0; keep && m < k->n_moved; m++) k->moved[m].solo = s->solo[k->moved[m].i];
    /* each run of small nodes: its parts */
    for (int i = 0, e, m = 0; i < n; i = e) {
        for (e = i + 1; s->solo[i] && e < n && s->solo[e]; e++) {}
        if (!s->solo[i]) {
            s->solo_np[i] = 1;
            continue;
        }
        while (keep && m < k->n_moved && k->moved[m].i < i) m++;
        if (keep && m < k->n_moved && k->moved[m].i < e) {
            k->runs[2 * k->n_runs] = i;
            k->runs[2 * k->n_runs + 1] = e;
            k->n_runs++;
        }
        cpu_part_run(c, s, nodes, i, e);
    }
    s->ahead_set = false; /* found when a shared split first needs it (cpu_run_split) */
    s->steps_set = false; /* planned when it first runs on kept decisions (cpu_run_split) */
    if (keep) k->layout = layout;
}

/* Is one of the sorted indices ch[0..nc) in [lo, hi)? */
static bool cpu_any_in(const int *ch, int nc, int lo, int hi)
{
    int a = 0, b = nc;
    while (a < b) { /* first >= lo */
        const int mid = (a + b) / 2;
        if (ch[mid] < lo) a = mid + 1;
        else b = mid;
    }
    return a < nc && ch[a] < hi;
}

/* The kept decisions for nodes[0..n) under layout, those about the moving
 * nodes whose views changed made again (with the fused runs that look at
 * them and the small runs that hold them); false where none are kept, or
 * where what was found again differs in what the kept ones rest on (a fused
 * run's length, a changed node's size class): then all is decided anew. */
static bool cpu_decide_kept(struct cpu_context *c, struct cpu_split_state *s, uint64_t layout, struct het_tensor *const *nodes, int n,
                            size_t *need, size_t *work)
{
    struct cpu_kept *k = &s->kept;
    if (!layout || k->layout != layout) return false; /* the state is this split's (cpu_split_state_of) */
    size_t nd = k->need, wk = k->work;
    int nc = 0;
    for (int m = 0; m < k->n_moved; m++) {
        struct cpu_kept_node *kn = &k->moved[m];
        const struct het_tensor *t = nodes[kn->i];
        const uint64_t g = cpu_node_geometry(t);
        if (g != kn->geometry) {
            kn->geometry = g;
            kn->need = cpu_work_size(c, t);
            kn->work = het_cpu_node_work(t);
            s->solo[kn->i] = cpu_node_is_solo(t);
            k->changed[nc++] = kn->i;
        }
        if (kn->need > nd) nd = kn->need;
        wk += kn->work;
    }
    if (nc) {
        for (int f = 0; f < k->n_fused; f++) {
            const int i = k->fused[2 * f], l = k->fused[2 * f + 1];
            const int look = cpu_fuse_look(nodes[i]);
            if (!cpu_any_in(k->changed, nc, i, i + (l > look ? l : look))) continue;
            if (het_cpu_fused_len(nodes + i, n - i) != l) return false;
            if (l == 1) continue;
            for (int x = i; x < i + l; x++) s->solo[x] = cpu_node_is_solo(nodes[x]);
            cpu_whole_run(s, i, l);
        }
        for (int m = 0; m < k->n_moved; m++)
            if (s->solo[k->moved[m].i] != k->moved[m].solo) return false;
        for (int r = 0; r < k->n_runs; r++)
            if (cpu_any_in(k->changed, nc, k->runs[2 * r], k->runs[2 * r + 1]))
                cpu_part_run(c, s, nodes, k->runs[2 * r], k->runs[2 * r + 1]);
        for (int i = 0; s->steps_set && i < n; i++) /* planned steps that looked at a changed node */
            if (s->step[i] && cpu_any_in(k->changed, nc, i, i + het_cpu_mm_step_nodes(s->step[i]) + 1))
                s->step[i] = NULL;
        s->stream_bytes = cpu_stream_bytes(nodes, n, &s->stream_rows); /* a matmul's rows may have moved */
    }
    *need = nd;
    *work = wk;
    return true;
}

/* Where the split of these nodes keeps its decisions: the state it had, or
 * the least recently run one's, given over to it. */
static struct cpu_split_state *cpu_split_state_of(struct cpu_context *c, struct het_tensor *const *nodes, int n)
{
    int lru = -1;
    for (int k = 0; k < c->n_splits; k++) {
        const int i = (c->split_next + k) % c->n_splits;
        struct cpu_split_state *s = &c->splits[i];
        if (s->nodes == nodes && s->n == n) {
            c->split_next = i + 1;
            return s;
        }
        if (lru < 0 || s->last_run < c->splits[lru].last_run) lru = i;
    }
    if (c->n_splits < CPU_SPLITS_KEPT) {
        if (c->n_splits == c->cap_splits) {
            const int cap = c->cap_splits ? 2 * c->cap_splits : 4;
            struct cpu_split_state *ns = realloc(c->splits, sizeof *ns * (size_t)cap);
            if (!ns) return NULL;
            c->splits = ns;
            c->cap_splits = cap;
        }
        lru = c->n_splits++;
        memset(&c->splits[lru], 0, sizeof c->splits[lru]);
    }
    struct cpu_split_state *s = &c->splits[lru];
    s->kept.layout = 0; /* what it kept was another split's */
    s->nodes = nodes;
    s->n = n;
    c->split_next = lru + 1;
    return s;
}

/* Every split's kept decisions forgotten (the weights or the kernels they
 * rest on changed). */
static void cpu_forget_splits(struct cpu_context *c)
{
    for (int i = 0; i < c->n_splits; i++) c->splits[i].kept.layout = 0;
}

/* May a planned matmul step start at node i: a matmul, a residual norm's
 * sum or a SWIGLU outside the runs of small nodes (het_cpu_mm_step_plan)? */
static bool cpu_step_may_start(const struct cpu_split_state *s, const struct het_tensor *t, int i)
{
    return !s->solo[i] && (t->op == HET_OP_MUL_MAT || t->op == HET_OP_ADD || t->op == HET_OP_SWIGLU);
}

/* The split's matmul steps planned ahead for its kept decisions, where the
 * threads' walk starts them: at each node that may start one, and after a
 * planned step at the node past its last, as the walk goes on (a step the
 * walk would start inside another's nodes, after a live step that ends
 * there, runs live). A planned step holds while the decisions are kept and
 * none of the nodes it looked at changed (cpu_decide_kept drops those
 * whose moving nodes did): what it rests on, the nodes' shapes, storage
 * and weights, the threads and the kernels, changes otherwise only with
 * the layout or when the device forgets every split (new weights, F32
 * activations). Planned with the scratch the split runs with (wsize only
 * grows). false: no memory (the split then runs without plans). */
static bool cpu_plan_steps(const struct cpu_context *c, struct cpu_split_state *s, struct het_tensor *const *nodes,
                           int n)
{
    int want = 0;
    for (int i = 0; i < n; i++) want += cpu_step_may_start(s, nodes[i], i);
    if (n > s->cap_step_nodes) {
        const struct het_cpu_mm_step **at = realloc(s->step, sizeof *at * (size_t)n);
        if (!at) return false;
        s->step = at;
        s->cap_step_nodes = n;
    }
    if (want > s->cap_steps) {
        free(s->step_pool);
        s->step_pool = aligned_alloc(64, (size_t)want * HET_CPU_MM_STEP_BYTES);
        s->cap_steps = s->step_pool ? want : 0;
        if (!s->step_pool) return false;
    }
    const struct het_compute_params p = cpu_params(c, 0, c->n_threads, c->stream.hint);
    for (int i = 0; i < n; i++) s->step[i] = NULL;
    for (int i = 0, used = 0; i < n; i++) {
        if (!cpu_step_may_start(s, nodes[i], i)) continue;
        struct het_cpu_mm_step *st = (struct het_cpu_mm_step *)(void *)(s->step_pool + (size_t)used * HET_CPU_MM_STEP_BYTES);
        enum het_status status;
        if (het_cpu_mm_step_plan(&p, nodes + i, n - i, st, &status) > 0 && status == HET_OK) {
            s->step[i] = st;
            used++;
            i += het_cpu_mm_step_nodes(st) - 1; /* the walk goes on after its nodes */
        }
    }
    return true;
}

static enum het_status cpu_run_split(het_device *dev, struct het_tensor *const *nodes, int n, het_error *err)
{
    struct cpu_context *c = dev->context;
    struct cpu_split_state *s = cpu_split_state_of(c, nodes, n);
    if (!s) return het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory for the decisions of a split");
    s->last_run = ++c->n_runs;
    enum het_status st = cpu_nodes_reserve(s, n, err);
    if (st != HET_OK) return st;
    size_t need, work;
    if (cpu_decide_kept(c, s, dev->layout, nodes, n, &need, &work)) dev->stats.n_splits_kept++;
    else cpu_decide(c, s, dev->layout, nodes, n, &need, &work);
    st = ensure_wdata(c, need, err);
    if (st != HET_OK) return st;

    struct het_cpu_profile *prof = c->profile;
    const double t_split = prof ? het_cpu_profile_now_us(prof) : 0.0;
    struct cpu_split_job j = {
        .c = c, .nodes = nodes, .ahead = s->ahead, .ahead_len = s->ahead_len, .ahead_step = s->ahead_step, .solo = s->solo,
        .solo_part = s->solo_part, .solo_np = s->solo_np, .n = n, .failed = -1, .stream = c->stream.hint,
    };
    atomic_init(&j.solo_failed, UINT64_MAX);
    const double stream_bytes = s->stream_bytes;
    const uint64_t like = (uint64_t)stream_bytes << 3 | (uint64_t)s->stream_rows;
    const double t_run = het_now_us();
    /* one thread, or nodes too small to share: the calling thread alone,
     * without the pool's steps (no atomics, no worker woken) */
    if (c->n_threads == 1 || (n > 0 && work / (size_t)n < HET_CPU_SHARE_MIN_BYTES)) {
        const struct het_compute_params p = cpu_params(c, 0, 1, c->stream.hint);
        double t0 = prof ? het_cpu_profile_now_us(prof) : 0.0;
        for (int i = 0, used; i < n; i += used) {
            enum het_status s;
            used = het_cpu_compute_nodes(&p, nodes + i, n - i, &s);
            if (s != HET_OK && j.failed < 0) {
                j.failed = i;
                j.failed_st = s;
            }
            if (prof) {
                const double t1 = het_cpu_profile_now_us(prof);
                het_cpu_profile_add(prof, nodes + i, used, t1 - t0);
                j.t_nodes += t1 - t0;
                t0 = t1;
            }
        }
        /* its time races the hints too: one thread streams as the shared
         * splits do (-t 1 on the Xeon ran NTA, untimed, at 39% of the read) */
        het_cpu_stream_update(&c->stream, 0, 0, 1e3 * (het_now_us() - t_run), stream_bytes, like);
    } else {
        struct het_cpu_sync *sync = het_cpu_pool_sync(c->threads);
        /* every step of earlier jobs is over: the word holds the next step */
        const unsigned step = (unsigned)(atomic_load(&sync->work) >> 32);
        atomic_init(&j.at, step);
        j.key0 = c->node_key + 1;
        c->node_key += (unsigned)n;
        if (!s->ahead_set) cpu_set_ahead(c, s, nodes, n); /* only shared steps wait */
        s->ahead_set = true;
        if (s->kept.layout && !s->steps_set) s->steps_set = cpu_plan_steps(c, s, nodes, n);
        j.steps = s->kept.layout && s->steps_set ? s->step : NULL;
        het_cpu_pool_run(c->threads, cpu_split_run, &j);
        dev->stats.n_steps_kept += j.n_steps_kept;
        c->last_split_us = het_now_us();
        het_cpu_stream_update(&c->stream, j.handoff_ns, j.handoff_n, 1e3 * (c->last_split_us - t_run),
                              stream_bytes, like);
    }
    if (prof) het_cpu_profile_add_split(prof, het_cpu_profile_now_us(prof) - t_split - j.t_nodes);
    const uint64_t sf = atomic_load(&j.solo_failed);
    if (sf != UINT64_MAX && (j.failed < 0 || (int)(sf >> 32) < j.failed)) {
        j.failed = (int)(sf >> 32);
        j.failed_st = (enum het_status)(int32_t)(uint32_t)sf;
    }
    if (j.failed >= 0) {
        const struct het_tensor *t = nodes[j.failed];
        return het_error_set(err, j.failed_st, "cpu: %s '%s' (%s x %s) failed: %s", het_op_name(t->op), t->name,
                             t->src[0] ? het_type_name(t->src[0]->type) : "-",
                             t->src[1] ? het_type_name(t->src[1]->type) : "-", het_status_name(j.failed_st));
    }
    return HET_OK;
}

/* Should weight t of w[0..n) be repacked (size bytes)? Compact panel forms
 * (no bigger than the file's blocks) always pay off. The larger forms do
 * not for the largest matrices (embedding/output), which are then streamed
 * as stored: there the bigger copy costs more bandwidth than it saves, but
 * only where a SIMD kernel streams that type (without one, the scalar GEMV
 * would be ~25x slower than the panels). An embedding table with a separate
 * output matrix is only gathered from. */
static bool cpu_should_pack(const struct cpu_context *c, const struct het_tensor *t, size_t size,
                            struct het_tensor *const *w, int n, bool lean)
{
    if (c->f32_act) return false; /* the F32 path reads the weights as stored */
    /* A 3-D expert tensor (mul_mat_id's) is packed only when its file pages
     * go once it is (het's own mapping; a device that reads the mapping in
     * place faults back only what it runs): otherwise the experts, most of
     * a mixture's bytes, would be resident twice. */
    if (t->ne[2] > 1 || t->ne[3] > 1) return (t->flags & HET_TENSOR_FLAG_DROPPABLE) != 0;
    const bool embd = !strcmp(t->name, "token_embd.weight");
    if (embd) {
        for (int i = 0; i < n; i++)
            if (!strcmp(w[i]->name, "output.weight")) return false;
    }
    const bool big = lean || embd || !strcmp(t->name, "output.weight");
    return !big || size <= het_nbytes(t) + het_nbytes(t) / 16 + 4096 || !het_cpu_gemv_is_simd(t->type, c->isa);
}

/* Bytes of t's load-time panels (0: none): a matrix's, or a 3-D expert
 * tensor's one block per expert (mul_mat_id). */
static size_t cpu_repack_size(const struct cpu_context *c, const struct het_tensor *t)
{
    return t->ne[2] > 1 ? het_cpu_mul_mat_id_repack_size(t, c->isa) : het_cpu_mul_mat_repack_size(t, c->isa);
}

/* Larger panel forms (AVX-512 Q4_0 4/3 of the file's bytes, K-quants about
 * twice) are resident memory the model file does not have. When all of
 * them together would add more than an eighth of the weights' bytes, the
 * weights are lean: larger forms are made only for types no SIMD kernel
 * streams as stored, so a large model's footprint stays near its file's. */
static bool cpu_lean_weights(const struct cpu_context *c, struct het_tensor *const *w, int n)
{
    size_t total = 0, extra = 0;
    for (int i = 0; i < n; i++) {
        const struct het_tensor *t = w[i];
        total += het_nbytes(t);
        if (t->ne[1] <= 1 || t->extra) continue;
        size_t size = cpu_repack_size(c, t);
        if (size > het_nbytes(t) && cpu_should_pack(c, t, size, w, n, false)) extra += size - het_nbytes(t);
    }
    return extra > total / 8;
}

/* The pool is the CPU's own memory: nothing to import (and the panels stay
 * out of it: see the top of the file). */
static enum het_status cpu_register_pool(het_device *dev, het_pool *pool, het_error *err)
{
    (void)dev, (void)pool, (void)err;
    return HET_OK;
}

/* One weight's load-time panels, made by every pool thread that joins:
 * parts of about CPU_REPACK_PART_BYTES of panels from a shared counter. Most
 * of a load is this: the packing, and the page faults of the fresh panel
 * memory, each page zeroed by the kernel on the thread that first writes it
 * (an 8B-shaped Q4_0 file, 4.9 GB of panels: 58% of the load's CPU time in
 * clear_page, 31% packing, all of it on one thread before). */
#define CPU_REPACK_PART_BYTES ((size_t)256 << 10)

struct cpu_repack_job {
    const struct het_tensor *t;
    enum het_status        (*range)(const struct het_tensor *, enum het_cpu_isa, void *, size_t, int64_t, int64_t);
    enum het_cpu_isa         isa;
    void                    *buf;
    size_t                   size;
    int                      n_seg;     /* > 1: in segments seg_bytes apart */
    size_t                   seg_bytes;
    int64_t                  items, per_part;
    _Atomic int64_t          next;
    _Atomic int              failed; /* a failing part's status; HET_OK while none */
};

static void cpu_repack_run(void *arg, struct het_cpu_worker *w, int ith)
{
    (void)w, (void)ith;
    struct cpu_repack_job *j = arg;
    for (;;) {
        const int64_t lo = atomic_fetch_add_explicit(&j->next, j->per_part, memory_order_relaxed);
        if (lo >= j->items) return;
        const int64_t hi = j->items - lo < j->per_part ? j->items : lo + j->per_part;
        const enum het_status st = j->n_seg > 1
                                       ? het_cpu_mul_mat_repack_seg(j->t, j->isa, j->buf, j->n_seg, j->seg_bytes, lo, hi)
                                       : j->range(j->t, j->isa, j->buf, j->size, lo, hi);
        if (st != HET_OK) {
            int none = HET_OK;
            atomic_compare_exchange_strong(&j->failed, &none, (int)st);
            atomic_store_explicit(&j->next, j->items, memory_order_relaxed); /* the others stop too */
            return;
        }
    }
}

static enum het_status cpu_repack(struct cpu_context *c, const struct het_tensor *t, void *buf, size_t size, int n_seg,
                                  size_t seg_bytes)
{
    const bool experts = t->ne[2] > 1; /* a 3-D expert tensor: one block of panels per expert */
    const int64_t items = experts ? het_cpu_mul_mat_id_repack_items(t, c->isa) : het_cpu_mul_mat_repack_items(t, c->isa);
    if (items <= 0) return HET_ERR_UNSUPPORTED;
    const size_t item_bytes = size / (size_t)items;
    struct cpu_repack_job j = {
        .t = t, .range = experts ? het_cpu_mul_mat_id_repack_range : het_cpu_mul_mat_repack_range,
        .isa = c->isa, .buf = buf, .size = size, .n_seg = n_seg, .seg_bytes = seg_bytes, .items = items,
        .per_part = item_bytes >= CPU_REPACK_PART_BYTES ? 1 : (int64_t)(CPU_REPACK_PART_BYTES / (item_bytes + 1)) + 1,
    };
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, HET_OK);
    het_cpu_pool_run(c->threads, cpu_repack_run, &j);
    return (enum het_status)atomic_load(&j.failed);
}

/* Repack matmul weights once into the kernels' panel layout, so every
 * matmul (decode included) runs the panel kernels without per-call packing. */
static enum het_status cpu_prepare_weights(het_device *dev, struct het_tensor *const *w, int n, het_error *err)
{
    struct cpu_context *c = dev->context;
    memset(c->ws_memo, 0, sizeof c->ws_memo); /* weights get panels: new keys */
    cpu_forget_splits(c); /* and the decisions kept (sizes, weights fetched ahead) */
    const bool lean = cpu_lean_weights(c, w, n);
    /* first the bytes of every panel to make, for one arena of them all */
    size_t total = 0, *sizes = calloc(n > 0 ? (size_t)n : 1, sizeof *sizes);
    uint8_t *segs = calloc(n > 0 ? (size_t)n : 1, 1);
    if (!sizes || !segs) {
        free(sizes);
        free(segs);
        return het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory repacking weights");
    }
    int n_new = 0;
    for (int i = 0; i < n; i++) {
        struct het_tensor *t = w[i];
        if (t->ne[1] <= 1 || t->extra) continue;
        size_t size = cpu_repack_size(c, t);
        if (!size || !cpu_should_pack(c, t, size, w, n, lean)) continue;
        sizes[i] = size;
        total += (size + 63) & ~(size_t)63;
        n_new++;
    }
    enum het_status st = HET_OK;
    if (c->n_packed + n_new > c->cap_packed) {
        int cap = c->cap_packed ? c->cap_packed : 64;
        while (cap < c->n_packed + n_new) cap *= 2;
        void **np = realloc(c->packed, (size_t)cap * sizeof *np);
        if (np) c->packed = np;
        struct het_tensor **nt = realloc(c->packed_t, (size_t)cap * sizeof *nt);
        if (nt) c->packed_t = nt;
        struct het_panel_arena **na = realloc(c->packed_in, (size_t)cap * sizeof *na);
        if (na) c->packed_in = na;
        if (!np || !nt || !na) st = het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory repacking weights");
        else c->cap_packed = cap;
    }
    /* With several threads, the 2-D weights in segments, one per thread
     * (quant_dot.h): the arena is n_threads regions of seg_bytes, segment t
     * of every weight at the same offset of region t, in the order the
     * weights come (the model gives them in the order a decode reads them),
     * then the other weights whole. Each thread's share of a token's
     * weights is then one range (bench_steps: 6.5% less a layer on two core
     * complexes than each matrix a stream of its own). */
    const int n_seg = c->n_threads > 1 && c->n_threads <= HET_CPU_SYNC_RUNS ? c->n_threads : 1;
    size_t region = 0;
    if (n_seg > 1)
        for (int i = 0; i < n; i++) {
            const size_t sb = sizes[i] ? het_cpu_mul_mat_seg_bytes(w[i], c->isa, n_seg) : 0; /* 0 unless 2-D */
            if (!sb) continue;
            total -= (sizes[i] + 63) & ~(size_t)63;
            sizes[i] = HET_CPU_PACKED_HEADER + sb; /* the header and segment 0: region 0's piece */
            region += sizes[i];
            total += sizes[i];
            segs[i] = 1;
        }
    total += region * (size_t)(n_seg - 1);
    struct het_panel_arena *arena = st == HET_OK && n_new ? het_panel_arena_new(total, err) : NULL;
    if (n_new && !arena && st == HET_OK) st = err ? err->status : HET_ERR_NOMEM;
    if (arena) het_panel_arena_take(arena, 0); /* held while filling: a failure below frees what is unused */
    void **bufs = calloc(n > 0 ? (size_t)n : 1, sizeof *bufs);
    if (!bufs && st == HET_OK) st = het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory repacking weights");
    /* region 0's pieces one per weight, regions 1.. held by those pieces */
    for (int i = 0; i < n && st == HET_OK; i++)
        if (segs[i]) bufs[i] = het_panel_arena_take(arena, sizes[i]); /* the arena was sized for them */
    if (st == HET_OK && region && n_seg > 1) {
        het_panel_arena_take(arena, region * (size_t)(n_seg - 1));
        het_panel_arena_put(arena);
    }
    for (int i = 0; i < n && st == HET_OK; i++) {
        struct het_tensor *t = w[i];
        if (!sizes[i]) continue;
        void *buf = segs[i] ? bufs[i] : het_panel_arena_take(arena, sizes[i]);
        st = cpu_repack(c, t, buf, sizes[i], segs[i] ? n_seg : 1, region);
        if (st != HET_OK) {
            het_panel_arena_put(arena);
            for (int x = i + 1; x < n; x++) /* the pieces taken ahead for weights not packed */
                if (segs[x] && bufs[x]) het_panel_arena_put(arena);
            het_error_set(err, st, "cpu: repacking '%s' (%s) failed", t->name, het_type_name(t->type));
            break;
        }
        c->packed_t[c->n_packed] = t;
        c->packed_in[c->n_packed] = arena;
        c->packed[c->n_packed++] = buf;
        c->packed_bytes += segs[i] ? sizes[i] * (size_t)n_seg : sizes[i];
        t->extra = buf;
        het_device_drop_weight_pages(dev, t); /* the panels replace the file's pages */
    }
    het_panel_arena_put(arena);
    free(sizes);
    free(segs);
    free(bufs);
    return st;
}

/* Free the panels of these weights (a calibration's, before its graph goes). */
static void cpu_release_weights(het_device *dev, struct het_tensor *const *w, int n)
{
    struct cpu_context *c = dev->context;
    memset(c->ws_memo, 0, sizeof c->ws_memo); /* the weights' panels, part of its keys, go */
    cpu_forget_splits(c); /* and the decisions kept (sizes, weights fetched ahead) */
    for (int k = 0; k < n; k++)
        for (int i = 0; i < c->n_packed; i++) {
            if (c->packed_t[i] != w[k]) continue;
            if (w[k]->extra == c->packed[i]) w[k]->extra = NULL;
            het_panel_arena_put(c->packed_in[i]);
            c->packed_bytes -= cpu_repack_size(c, w[k]);
            c->n_packed--;
            c->packed_t[i] = c->packed_t[c->n_packed];
            c->packed[i] = c->packed[c->n_packed];
            c->packed_in[i] = c->packed_in[c->n_packed];
            break;
        }
}

static void cpu_free(het_device *dev)
{
    struct cpu_context *c = dev->context;
    if (!c) return;
    /* the model outlives its devices: detach our panels from its tensors */
    for (int i = 0; i < c->n_packed; i++) {
        if (c->packed_t[i]->extra == c->packed[i]) c->packed_t[i]->extra = NULL;
        het_panel_arena_put(c->packed_in[i]);
    }
    free(c->packed);
    free(c->packed_t);
    free(c->packed_in);
    free(c->wdata);
    for (int i = 0; i < c->n_splits; i++) {
        struct cpu_split_state *s = &c->splits[i];
        free(s->node_buf);
        free(s->step);
        free(s->step_pool);
        free(s->kept.moved);
        free(s->kept.runs);
        free(s->kept.fused);
        free(s->kept.changed);
    }
    free(c->splits);
    het_cpu_pool_free(c->threads);
    het_cpu_profile_free(c->profile);
    free(c);
}

/* A graph is about to be built and run. Between two decode tokens the host
 * builds, plans and schedules for ~340 us (Qwen3-0.6B, Zen 4 VM; 180-190 us
 * from one token's last step to the next one's first on a Zen 5 with the
 * scratch plan kept and the split's decisions cheaper), longer than the
 * workers spin, so they sleep, and a sleeping vCPU here can take
 * milliseconds to come back: wake them now (they spin for the job, at most
 * 1 ms). Only while this device is running graphs (a split ended within
 * HET_CPU_EXPECT_US): a graph that runs elsewhere, on lavapipe's threads
 * say, gets no spinning threads beside it. Decode tokens, the caller's
 * split time, alternately with and without (256 each way): 0.977-0.989x on
 * four files quiet, 0.977-1.009x beside two busy loops. */
static void cpu_expect_run(het_device *dev)
{
    struct cpu_context *c = dev->context;
    if (!c->threads || c->last_split_us == 0.0) return;
    if (het_now_us() - c->last_split_us < HET_CPU_EXPECT_US) het_cpu_pool_expect(c->threads);
}

static const struct het_device_i cpu_iface = {
    /* .supports_op        = */ cpu_supports_op,
    /* .register_memory    = */ NULL, /* host memory is the CPU's own */
    /* .unregister_memory  = */ NULL,
    /* .prepare_weights    = */ cpu_prepare_weights,
    /* .run_split          = */ cpu_run_split,
    /* .sync               = */ NULL, /* run_split is synchronous */
    /* .free               = */ cpu_free,
    /* .register_pool      = */ cpu_register_pool,
    /* .default_profile    = */ NULL, /* a roofline from dev->roofline, until calibrated */
    /* .release_weights    = */ cpu_release_weights,
    /* .expect_run         = */ cpu_expect_run,
};

/* The description names what changes the device's speed and results: it
 * keys the device's calibration profile, so a profile measured on one
 * processor (family / model) is not taken for another's. */
static void cpu_describe(het_device *dev)
{
    const struct cpu_context *c = dev->context;
    char who[128];
    het_cpu_identity(&c->features, who, sizeof who);
    char l2[32] = "";
    if (c->l2_bytes) snprintf(l2, sizeof l2, ", L2 %zu KB", c->l2_bytes >> 10);
    snprintf(dev->desc, sizeof dev->desc, "CPU %s, %d threads%s, kernels: %s%s%s", who, c->n_threads, l2,
             het_cpu_isa_name(c->isa), c->features.avx_vnni ? " (avx-vnni)" : "", c->f32_act ? ", f32 activations" : "");
}

het_device *het_cpu_device_init(int n_threads, het_error *err)
{
    struct cpu_context *c = calloc(1, sizeof *c);
    if (!c) {
        het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory");
        return NULL;
    }
    int cores;
    cpu_topology(&cores, &c->l2_bytes);
    c->n_threads = n_threads > 0 ? n_threads : cores;
    if (het_cpu_isa_env_check(err) != HET_OK) {
        free(c);
        return NULL;
    }
    het_cpu_features_detect(&c->features);
    c->isa = het_cpu_isa_select(&c->features);
    if (het_cpu_stream_init(&c->stream, getenv("HET_CPU_STREAM"), err) != HET_OK) {
        free(c);
        return NULL;
    }
    c->threads = het_cpu_pool_new(c->n_threads, err);
    if (!c->threads) {
        free(c);
        return NULL;
    }
    c->profile = het_cpu_profile_new();
    het_device *dev = het_device_new(&cpu_iface, HET_DEVICE_CPU, "cpu", c);
    if (!dev) {
        het_cpu_pool_free(c->threads);
        het_cpu_profile_free(c->profile);
        free(c);
        het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory");
        return NULL;
    }
    cpu_describe(dev);
    dev->caps = (struct het_device_caps){ .async = false, .host_mapped = true, .lossy = false,
                                          .shares_cpu_cores = true, .host_timed = true, .repacks_weights = true };
    /* a dual-channel DDR5 laptop; calibration replaces it */
    dev->roofline = (struct het_roofline){ .gbps = 40, .gflops = 200, .t0_us = 1.0, .split_us = 3,
                                           .source = "CPU: 40 GB/s, 200 GFLOP/s" };
    return dev;
}

enum het_status het_cpu_device_set_f32_activations(het_device *dev, bool on, het_error *err)
{
    if (!dev || dev->iface.run_split != cpu_run_split)
        return het_error_set(err, HET_ERR_INVALID, "cpu: f32 activations: not a CPU device");
    struct cpu_context *c = dev->context;
    if (c->n_packed && on)
        return het_error_set(err, HET_ERR_INVALID, "cpu: f32 activations must be chosen before weights are prepared");
    c->f32_act = on;
    memset(c->ws_memo, 0, sizeof c->ws_memo); /* the sizes it holds were for the other activations */
    cpu_forget_splits(c); /* and the decisions kept (sizes, weights fetched ahead) */
    cpu_describe(dev);
    return HET_OK;
}

enum het_status het_cpu_device_stream_stats(const het_device *dev, struct het_cpu_stream_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!dev || dev->iface.run_split != cpu_run_split) return HET_ERR_INVALID;
    const struct cpu_context *c = dev->context;
    out->splits_nta = c->stream.splits[HET_CPU_STREAM_NTA];
    out->splits_t0 = c->stream.splits[HET_CPU_STREAM_T0];
    out->splits_t1 = c->stream.splits[HET_CPU_STREAM_T1];
    out->races = c->stream.races;
    out->handoff_ns = c->stream.handoff_ns;
    out->far_ns = het_cpu_stream_far_ns();
    out->fixed = c->stream.mode == HET_CPU_STREAM_FIXED;
    return HET_OK;
}

int het_cpu_device_n_threads(const het_device *dev)
{
    if (dev->kind != HET_DEVICE_CPU) return 0;
    return ((const struct cpu_context *)dev->context)->n_threads;
}
