/*
 * suballoc.h — offset allocator behind het_pool (internal, not thread-safe).
 *
 * Manages [0, total) in units of a power-of-two granule with metadata kept
 * entirely outside the managed region. Blocks (free or used) form a doubly
 * linked list in address order, so a release merges with both neighbours in
 * O(1). Free blocks sit in a treap ordered by (size, offset): an allocation
 * takes a small free block that holds the request at the requested alignment
 * (best fit when align <= granule; with a larger alignment, the best of a
 * few close candidates or else the smallest block large enough to fit at
 * any offset), in O(log n) expected time. Used blocks sit in a treap ordered
 * by offset, so a release finds its block in O(log n). The search is
 * complete: a request fails only when no free block can hold it (near
 * exhaustion that last check may visit every candidate block).
 */
#ifndef HET_MEMORY_SUBALLOC_H
#define HET_MEMORY_SUBALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "het/status.h"

struct het_sa_node;

struct het_suballoc {
    struct het_sa_node *nodes;
    uint32_t cap;           /* nodes allocated                          */
    uint32_t n_nodes;       /* nodes ever handed out (<= cap)           */
    uint32_t spare;         /* recycled nodes, chained through .next    */
    uint32_t free_root;     /* treap of free blocks by (size, offset)   */
    uint32_t used_root;     /* treap of used blocks by offset           */
    uint32_t head;          /* block at offset 0                        */
    size_t   total, granule;
    size_t   used;          /* bytes in used blocks                     */
    uint64_t n_used, n_free;
    uint64_t rng;           /* treap priorities                         */
};

/* total and granule must be > 0, granule a power of two, total a multiple. */
enum het_status het_suballoc_init(struct het_suballoc *sa, size_t total, size_t granule, het_error *err);
void het_suballoc_free(struct het_suballoc *sa);

/* size > 0; align a power of two (raised to the granule). On success *off is
 * a multiple of align and *got = size rounded up to the granule. On failure
 * the allocator is unchanged: HET_ERR_INVALID (bad arguments), HET_ERR_NOMEM
 * (does not fit, or no memory for metadata). */
enum het_status het_suballoc_alloc(struct het_suballoc *sa, size_t size, size_t align, size_t *off,
                                   size_t *got, het_error *err);
/* Release the used block at off, whose size must be `size`. */
enum het_status het_suballoc_release(struct het_suballoc *sa, size_t off, size_t size, het_error *err);

size_t het_suballoc_largest_free(const struct het_suballoc *sa);

/* Verify every invariant (blocks tile [0,total), no two free neighbours,
 * treaps ordered and heap-ordered, counters match). For tests; O(n). */
enum het_status het_suballoc_check(const struct het_suballoc *sa, het_error *err);

#endif /* HET_MEMORY_SUBALLOC_H */
