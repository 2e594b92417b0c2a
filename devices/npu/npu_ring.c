/*
 * npu_ring.c — the bounded double-buffered staging ring for weights that are
 * not resident (not pinned / imported for the NPU).
 *
 * Pinning every tensor of a large model locks it into unevictable memory and
 * drives the machine into swap (the design notes' 27B collapse). Instead,
 * weights beyond the pin budget stay in pageable memory (the repack cache's
 * mapping) and each dispatch copies its weights into one of two fixed
 * staging slots: while the NPU reads slot i, the host fills slot i^1. A slot
 * is reused only after the work that read it has completed, which the
 * caller's wait function confirms (a timeline point on hardware; emulation
 * is synchronous, so its tokens are complete when returned).
 */
#include "devices/npu/npu_internal.h"

#include <stdlib.h>
#include <string.h>

enum het_status npu_ring_init(struct npu_ring *r, size_t slot_bytes, het_error *err)
{
    memset(r, 0, sizeof *r);
    slot_bytes = (slot_bytes + 4095) & ~(size_t)4095;
    for (int i = 0; i < 2; i++) {
        r->slot[i] = aligned_alloc(4096, slot_bytes);
        if (!r->slot[i]) {
            npu_ring_free(r);
            return het_error_set(err, HET_ERR_NOMEM, "npu: cannot allocate a %zu-byte staging slot", slot_bytes);
        }
        r->owned[i] = true;
    }
    r->slot_bytes = slot_bytes;
    return HET_OK;
}

void npu_ring_init_external(struct npu_ring *r, void *slot0, void *slot1, size_t slot_bytes)
{
    memset(r, 0, sizeof *r);
    r->slot[0] = slot0;
    r->slot[1] = slot1;
    r->slot_bytes = slot_bytes;
}

void npu_ring_free(struct npu_ring *r)
{
    for (int i = 0; i < 2; i++)
        if (r->owned[i]) free(r->slot[i]);
    memset(r, 0, sizeof *r);
}

enum het_status npu_ring_acquire(struct npu_ring *r, npu_ring_wait_fn wait, void *user, int *slot, het_error *err)
{
    if (!r->slot[0] || !r->slot[1])
        return het_error_set(err, HET_ERR_INVALID, "npu: staging ring not initialised");
    const int i = r->next;
    if (r->token[i] && wait) {
        enum het_status st = wait(user, r->token[i], err);
        if (st != HET_OK) return st;
    }
    r->token[i] = 0;
    r->next = i ^ 1;
    r->n_acquired++;
    *slot = i;
    return HET_OK;
}

void npu_ring_release(struct npu_ring *r, int slot, uint64_t token)
{
    if (slot == 0 || slot == 1) r->token[slot] = token;
}
