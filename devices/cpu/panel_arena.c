/*
 * panel_arena.c — memory for the CPU device's weight panels: one private
 * anonymous mapping per prepare_weights call, 2 MiB aligned and advised
 * for transparent huge pages, handed out front to back and unmapped when
 * the last panel in it is freed.
 *
 * Why not the memory pool: the panels are the CPU's own layout of the
 * weights, which no other device reads, and decode streams them. The pool
 * is a memfd (shared memory), which gets huge pages only where the
 * administrator enabled them for shmem (Debian: never); anonymous memory
 * gets them with MADV_HUGEPAGE under the default "madvise" setting. In this
 * project's VM two threads read 46–47 GB/s through 2 MiB pages and 32–33
 * GB/s through 4 KiB ones (the same loop, interleaved, 512 MiB): every page
 * crossing costs a nested page walk. Where huge pages are unavailable the
 * mapping is plain 4 KiB pages, as before.
 */
#include "devices/cpu/panel_arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define ARENA_ALIGN ((size_t)2 << 20)

struct het_panel_arena {
    uint8_t *base;  /* 2 MiB aligned                   */
    size_t   size;  /* bytes mapped at base            */
    size_t   used;
    int      refs;  /* pieces taken and not yet put    */
    void    *map;   /* the whole mapping (with slack)  */
    size_t   map_size;
};

struct het_panel_arena *het_panel_arena_new(size_t size, het_error *err)
{
    struct het_panel_arena *a = calloc(1, sizeof *a);
    if (!a) {
        het_error_set(err, HET_ERR_NOMEM, "cpu: out of memory for a panel arena");
        return NULL;
    }
    a->size = (size + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    a->map_size = a->size + ARENA_ALIGN;
    a->map = mmap(NULL, a->map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->map == MAP_FAILED) {
        free(a);
        het_error_set(err, HET_ERR_NOMEM, "cpu: cannot map %zu bytes for weight panels", size);
        return NULL;
    }
    a->base = (uint8_t *)(((uintptr_t)a->map + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    (void)madvise(a->base, a->size, MADV_HUGEPAGE); /* best effort: 4 KiB pages otherwise */
    return a;
}

void *het_panel_arena_take(struct het_panel_arena *a, size_t size)
{
    const size_t at = (a->used + 63) & ~(size_t)63;
    if (at > a->size || size > a->size - at) return NULL;
    a->used = at + size;
    a->refs++;
    return a->base + at;
}

void het_panel_arena_put(struct het_panel_arena *a)
{
    if (!a || --a->refs > 0) return;
    munmap(a->map, a->map_size);
    free(a);
}
