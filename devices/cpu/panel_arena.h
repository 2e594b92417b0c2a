/*
 * panel_arena.h — memory for the CPU device's weight panels (see
 * panel_arena.c).
 */
#ifndef HET_CPU_PANEL_ARENA_H
#define HET_CPU_PANEL_ARENA_H

#include "het/status.h"

#include <stddef.h>

struct het_panel_arena;

/* An arena of at least size bytes of private anonymous memory, asking for
 * transparent huge pages; NULL (err set) when the mapping fails. */
struct het_panel_arena *het_panel_arena_new(size_t size, het_error *err);
/* The next size bytes (64-byte aligned) of a; NULL when a is full. Each
 * piece taken holds a reference. */
void *het_panel_arena_take(struct het_panel_arena *a, size_t size);
/* Give back one piece's reference; the last one unmaps the arena. */
void het_panel_arena_put(struct het_panel_arena *a);
#endif /* HET_CPU_PANEL_ARENA_H */
