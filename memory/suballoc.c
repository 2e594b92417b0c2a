/*
 * suballoc.c — the offset allocator behind het_pool (see suballoc.h).
 *
 * Nodes live in one growable array and are named by index, so growing the
 * array never invalidates a link. Every allocation reserves the (at most two)
 * nodes a split can need before it changes anything, which is what makes a
 * failed call leave the allocator exactly as it was. Treaps are used for both
 * indexes because they need no rebalancing cases: insert and delete are a
 * split and a merge, with random priorities keeping the depth O(log n).
 */
#include "memory/suballoc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NIL UINT32_MAX

struct het_sa_node {
    size_t   off, size;
    uint32_t prev, next;    /* address-order neighbours; next also chains spares */
    uint32_t left, right;   /* treap children                                    */
    uint32_t prio;          /* treap priority (max-heap)                         */
    uint8_t  is_free;
};

/* ---- node storage -------------------------------------------------------- */

static uint32_t spare_count(const struct het_suballoc *sa)
{
    uint32_t n = 0;
    for (uint32_t i = sa->spare; i != NIL && n < 2; i = sa->nodes[i].next) n++;
    return n;
}

/* Make sure k <= 2 nodes can be taken without allocating. */
static enum het_status reserve_nodes(struct het_suballoc *sa, uint32_t k, het_error *err)
{
    if ((sa->cap - sa->n_nodes) + spare_count(sa) >= k) return HET_OK;
    if (sa->cap > (NIL - 1) / 2)
        return het_error_set(err, HET_ERR_NOMEM, "more than %u blocks", (unsigned)sa->cap);
    uint32_t cap = sa->cap ? sa->cap * 2 : 64;
    struct het_sa_node *n = realloc(sa->nodes, (size_t)cap * sizeof *n);
    if (!n) return het_error_set(err, HET_ERR_NOMEM, "no memory for %u block records", (unsigned)cap);
    sa->nodes = n;
    sa->cap = cap;
    return HET_OK;
}

static uint32_t next_prio(struct het_suballoc *sa)
{
    sa->rng ^= sa->rng >> 12;
    sa->rng ^= sa->rng << 25;
    sa->rng ^= sa->rng >> 27;
    return (uint32_t)((sa->rng * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Caller has reserved the node. */
static uint32_t node_new(struct het_suballoc *sa, size_t off, size_t size, bool is_free)
{
    uint32_t i;
    if (sa->spare != NIL) {
        i = sa->spare;
        sa->spare = sa->nodes[i].next;
    } else {
        i = sa->n_nodes++;
    }
    struct het_sa_node *n = &sa->nodes[i];
    n->off = off;
    n->size = size;
    n->prev = n->next = n->left = n->right = NIL;
    n->prio = next_prio(sa);
    n->is_free = is_free;
    return i;
}

static void node_drop(struct het_suballoc *sa, uint32_t i)
{
    sa->nodes[i].next = sa->spare;
    sa->spare = i;
}

/* ---- treaps -------------------------------------------------------------- */

/* by_size: key (size, off), else key off. Offsets are unique, so both orders are total. */
static bool key_less(const struct het_sa_node *nd, uint32_t a, uint32_t b, bool by_size)
{
    if (by_size && nd[a].size != nd[b].size) return nd[a].size < nd[b].size;
    return nd[a].off < nd[b].off;
}

/* Split t into keys < x and keys > x (x itself is not in t). */
static void tr_split(struct het_sa_node *nd, uint32_t t, uint32_t x, bool by_size, uint32_t *l, uint32_t *r)
{
    if (t == NIL) {
        *l = *r = NIL;
    } else if (key_less(nd, t, x, by_size)) {
        tr_split(nd, nd[t].right, x, by_size, &nd[t].right, r);
        *l = t;
    } else {
        tr_split(nd, nd[t].left, x, by_size, l, &nd[t].left);
        *r = t;
    }
}

/* Every key of a is below every key of b. */
static uint32_t tr_merge(struct het_sa_node *nd, uint32_t a, uint32_t b)
{
    if (a == NIL) return b;
    if (b == NIL) return a;
    if (nd[a].prio > nd[b].prio) {
        nd[a].right = tr_merge(nd, nd[a].right, b);
        return a;
    }
    nd[b].left = tr_merge(nd, a, nd[b].left);
    return b;
}

static uint32_t tr_insert(struct het_sa_node *nd, uint32_t t, uint32_t x, bool by_size)
{
    if (t == NIL) {
        nd[x].left = nd[x].right = NIL;
        return x;
    }
    if (nd[x].prio > nd[t].prio) {
        tr_split(nd, t, x, by_size, &nd[x].left, &nd[x].right);
        return x;
    }
    if (key_less(nd, x, t, by_size)) nd[t].left = tr_insert(nd, nd[t].left, x, by_size);
    else nd[t].right = tr_insert(nd, nd[t].right, x, by_size);
    return t;
}

/* x must be in t. */
static uint32_t tr_delete(struct het_sa_node *nd, uint32_t t, uint32_t x, bool by_size)
{
    if (t == x) {
        uint32_t m = tr_merge(nd, nd[t].left, nd[t].right);
        nd[x].left = nd[x].right = NIL;
        return m;
    }
    if (key_less(nd, x, t, by_size)) nd[t].left = tr_delete(nd, nd[t].left, x, by_size);
    else nd[t].right = tr_delete(nd, nd[t].right, x, by_size);
    return t;
}

static void free_insert(struct het_suballoc *sa, uint32_t i)
{
    sa->nodes[i].is_free = 1;
    sa->free_root = tr_insert(sa->nodes, sa->free_root, i, true);
    sa->n_free++;
}

static void free_remove(struct het_suballoc *sa, uint32_t i)
{
    sa->free_root = tr_delete(sa->nodes, sa->free_root, i, true);
    sa->n_free--;
}

static void used_insert(struct het_suballoc *sa, uint32_t i)
{
    sa->nodes[i].is_free = 0;
    sa->used_root = tr_insert(sa->nodes, sa->used_root, i, false);
    sa->n_used++;
    sa->used += sa->nodes[i].size;
}

static void used_remove(struct het_suballoc *sa, uint32_t i)
{
    sa->used_root = tr_delete(sa->nodes, sa->used_root, i, false);
    sa->n_used--;
    sa->used -= sa->nodes[i].size;
}

/* Smallest free block with size >= need. */
static uint32_t free_lower_bound(const struct het_suballoc *sa, size_t need)
{
    uint32_t best = NIL;
    for (uint32_t t = sa->free_root; t != NIL;) {
        if (sa->nodes[t].size >= need) {
            best = t;
            t = sa->nodes[t].left;
        } else {
            t = sa->nodes[t].right;
        }
    }
    return best;
}

/* Next free block after x in (size, offset) order. */
static uint32_t free_successor(const struct het_suballoc *sa, uint32_t x)
{
    uint32_t best = NIL;
    for (uint32_t t = sa->free_root; t != NIL;) {
        if (key_less(sa->nodes, x, t, true)) {
            best = t;
            t = sa->nodes[t].left;
        } else {
            t = sa->nodes[t].right;
        }
    }
    return best;
}

static uint32_t used_find(const struct het_suballoc *sa, size_t off)
{
    uint32_t t = sa->used_root;
    while (t != NIL && sa->nodes[t].off != off)
        t = off < sa->nodes[t].off ? sa->nodes[t].left : sa->nodes[t].right;
    return t;
}

/* ---- address list -------------------------------------------------------- */

static void link_before(struct het_suballoc *sa, uint32_t at, uint32_t x)
{
    struct het_sa_node *nd = sa->nodes;
    nd[x].prev = nd[at].prev;
    nd[x].next = at;
    if (nd[at].prev != NIL) nd[nd[at].prev].next = x;
    else sa->head = x;
    nd[at].prev = x;
}

static void link_after(struct het_suballoc *sa, uint32_t at, uint32_t x)
{
    struct het_sa_node *nd = sa->nodes;
    nd[x].next = nd[at].next;
    nd[x].prev = at;
    if (nd[at].next != NIL) nd[nd[at].next].prev = x;
    nd[at].next = x;
}

static void unlink_node(struct het_suballoc *sa, uint32_t x)
{
    struct het_sa_node *nd = sa->nodes;
    if (nd[x].prev != NIL) nd[nd[x].prev].next = nd[x].next;
    else sa->head = nd[x].next;
    if (nd[x].next != NIL) nd[nd[x].next].prev = nd[x].prev;
}

/* ---- public -------------------------------------------------------------- */

enum het_status het_suballoc_init(struct het_suballoc *sa, size_t total, size_t granule, het_error *err)
{
    memset(sa, 0, sizeof *sa);
    sa->spare = sa->free_root = sa->used_root = sa->head = NIL;
    if (!granule || (granule & (granule - 1)) || !total || total % granule)
        return het_error_set(err, HET_ERR_INVALID, "size %zu is not a positive multiple of granule %zu",
                             total, granule);
    sa->total = total;
    sa->granule = granule;
    sa->rng = 0x853C49E6748FEA9Bull ^ total;
    enum het_status st = reserve_nodes(sa, 2, err);
    if (st != HET_OK) return st;
    sa->head = node_new(sa, 0, total, true);
    free_insert(sa, sa->head);
    return HET_OK;
}

void het_suballoc_free(struct het_suballoc *sa)
{
    if (!sa) return;
    free(sa->nodes);
    memset(sa, 0, sizeof *sa);
}

static size_t align_gap(size_t off, size_t align)
{
    size_t rem = off & (align - 1);
    return rem ? align - rem : 0;
}

/* Number of too-small-to-be-sure blocks looked at before settling for the
 * smallest block that is sure to fit. */
#define HET_SA_FIT_BUDGET 4

/* A free block that holds need bytes at align. Blocks of size >= need + slack
 * (slack = align - granule, the largest possible alignment gap) always fit,
 * so the smallest of those ("sure") is found in O(log n); up to
 * HET_SA_FIT_BUDGET smaller blocks are tried first for a tighter fit. Only
 * when no block is sure to fit (the pool is nearly full) are all candidates
 * tried, which keeps the search complete. */
static uint32_t find_fit(const struct het_suballoc *sa, size_t need, size_t align, size_t *gap)
{
    size_t slack = align - sa->granule;
    uint32_t sure = need <= SIZE_MAX - slack ? free_lower_bound(sa, need + slack) : NIL;
    int budget = HET_SA_FIT_BUDGET;
    for (uint32_t t = free_lower_bound(sa, need); t != NIL && t != sure; t = free_successor(sa, t)) {
        if (sure != NIL && budget-- == 0) break;
        const struct het_sa_node *n = &sa->nodes[t];
        size_t g = align_gap(n->off, align);
        if (g <= n->size - need) {
            *gap = g;
            return t;
        }
    }
    if (sure != NIL) *gap = align_gap(sa->nodes[sure].off, align);
    return sure;
}

/* Cut [off+gap, off+gap+need) out of free block t and mark it used. */
static void carve(struct het_suballoc *sa, uint32_t t, size_t gap, size_t need)
{
    free_remove(sa, t);
    if (gap) {
        uint32_t g = node_new(sa, sa->nodes[t].off, gap, true);
        link_before(sa, t, g);
        sa->nodes[t].off += gap;
        sa->nodes[t].size -= gap;
        free_insert(sa, g);
    }
    if (sa->nodes[t].size > need) {
        uint32_t r = node_new(sa, sa->nodes[t].off + need, sa->nodes[t].size - need, true);
        link_after(sa, t, r);
        sa->nodes[t].size = need;
        free_insert(sa, r);
    }
    used_insert(sa, t);
}

enum het_status het_suballoc_alloc(struct het_suballoc *sa, size_t size, size_t align, size_t *off,
                                   size_t *got, het_error *err)
{
    *off = *got = 0;
    if (!size) return het_error_set(err, HET_ERR_INVALID, "zero-byte allocation");
    if (align & (align - 1))
        return het_error_set(err, HET_ERR_INVALID, "alignment %zu is not a power of two", align);
    if (align < sa->granule) align = sa->granule;
    size_t free_bytes = sa->total - sa->used;
    if (size > free_bytes)
        return het_error_set(err, HET_ERR_NOMEM,
                             "%zu bytes do not fit: %zu of %zu bytes free, largest free block %zu",
                             size, free_bytes, sa->total, het_suballoc_largest_free(sa));
    size_t need = (size + sa->granule - 1) & ~(sa->granule - 1);
    enum het_status st = reserve_nodes(sa, 2, err);
    if (st != HET_OK) return st;
    size_t gap = 0;
    uint32_t t = find_fit(sa, need, align, &gap);
    if (t == NIL)
        return het_error_set(err, HET_ERR_NOMEM,
                             "%zu bytes at alignment %zu do not fit: %zu of %zu bytes free, "
                             "largest free block %zu", size, align, free_bytes, sa->total,
                             het_suballoc_largest_free(sa));
    carve(sa, t, gap, need);
    *off = sa->nodes[t].off;
    *got = need;
    return HET_OK;
}

/* Merge free neighbour nb (prev or next of t) into t; t is in no treap. */
static void absorb(struct het_suballoc *sa, uint32_t t, uint32_t nb)
{
    free_remove(sa, nb);
    if (sa->nodes[nb].off < sa->nodes[t].off) sa->nodes[t].off = sa->nodes[nb].off;
    sa->nodes[t].size += sa->nodes[nb].size;
    unlink_node(sa, nb);
    node_drop(sa, nb);
}

enum het_status het_suballoc_release(struct het_suballoc *sa, size_t off, size_t size, het_error *err)
{
    uint32_t t = used_find(sa, off);
    if (t == NIL)
        return het_error_set(err, HET_ERR_INVALID, "offset %zu is not the start of a live slice", off);
    if (sa->nodes[t].size != size)
        return het_error_set(err, HET_ERR_INVALID, "slice at offset %zu has size %zu, not %zu", off,
                             sa->nodes[t].size, size);
    used_remove(sa, t);
    uint32_t p = sa->nodes[t].prev, n = sa->nodes[t].next;
    if (p != NIL && sa->nodes[p].is_free) absorb(sa, t, p);
    if (n != NIL && sa->nodes[n].is_free) absorb(sa, t, n);
    free_insert(sa, t);
    return HET_OK;
}

size_t het_suballoc_largest_free(const struct het_suballoc *sa)
{
    uint32_t t = sa->free_root;
    if (t == NIL) return 0;
    while (sa->nodes[t].right != NIL) t = sa->nodes[t].right;
    return sa->nodes[t].size;
}

/* ---- invariant check ----------------------------------------------------- */

/* Count the nodes of treap t, checking order (strictly between lo and hi,
 * NIL = unbounded), heap order and membership. -1 on the first violation. */
static long check_treap(const struct het_suballoc *sa, uint32_t t, uint32_t lo, uint32_t hi, bool by_size,
                        uint32_t parent_prio, int depth)
{
    if (t == NIL) return 0;
    const struct het_sa_node *nd = sa->nodes;
    if (t >= sa->n_nodes || depth > 4096 || nd[t].prio > parent_prio || nd[t].is_free != by_size) return -1;
    if (lo != NIL && !key_less(nd, lo, t, by_size)) return -1;
    if (hi != NIL && !key_less(nd, t, hi, by_size)) return -1;
    long a = check_treap(sa, nd[t].left, lo, t, by_size, nd[t].prio, depth + 1);
    long b = check_treap(sa, nd[t].right, t, hi, by_size, nd[t].prio, depth + 1);
    return a < 0 || b < 0 ? -1 : a + b + 1;
}

enum het_status het_suballoc_check(const struct het_suballoc *sa, het_error *err)
{
    const struct het_sa_node *nd = sa->nodes;
    size_t expect = 0, used = 0;
    uint64_t n_free = 0, n_used = 0;
    uint32_t prev = NIL;
    for (uint32_t i = sa->head; i != NIL; prev = i, i = nd[i].next) {
        if (i >= sa->n_nodes || nd[i].prev != prev || nd[i].off != expect || !nd[i].size ||
            nd[i].size % sa->granule || nd[i].size > sa->total - expect)
            return het_error_set(err, HET_ERR_INVALID, "block list broken at offset %zu", expect);
        if (nd[i].is_free && prev != NIL && nd[prev].is_free)
            return het_error_set(err, HET_ERR_INVALID, "free blocks not merged at offset %zu", expect);
        if (nd[i].is_free) n_free++;
        else { n_used++; used += nd[i].size; }
        expect += nd[i].size;
    }
    if (expect != sa->total)
        return het_error_set(err, HET_ERR_INVALID, "blocks cover %zu of %zu bytes", expect, sa->total);
    if (used != sa->used || n_used != sa->n_used || n_free != sa->n_free)
        return het_error_set(err, HET_ERR_INVALID, "counters: used %zu/%zu, live %llu/%llu, free %llu/%llu",
                             used, sa->used, (unsigned long long)n_used, (unsigned long long)sa->n_used,
                             (unsigned long long)n_free, (unsigned long long)sa->n_free);
    long tf = check_treap(sa, sa->free_root, NIL, NIL, true, UINT32_MAX, 0);
    long tu = check_treap(sa, sa->used_root, NIL, NIL, false, UINT32_MAX, 0);
    if (tf < 0 || (uint64_t)tf != n_free || tu < 0 || (uint64_t)tu != n_used)
        return het_error_set(err, HET_ERR_INVALID, "index broken: free treap %ld of %llu, used treap %ld of %llu",
                             tf, (unsigned long long)n_free, tu, (unsigned long long)n_used);
    return HET_OK;
}
