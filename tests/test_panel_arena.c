/*
 * test_panel_arena.c — the CPU panels' arena (devices/cpu/panel_arena.c):
 * pieces are 64-byte aligned, inside the arena, never overlap, the arena
 * refuses what does not fit, and every piece can be written whole (ASan
 * and the page protections catch a piece outside the mapping). The arena
 * goes when the last piece is given back (ASan's leak check: no arena
 * struct is left).
 */
#include "devices/cpu/panel_arena.h"
#include "testutil.h"

#include <stdint.h>
#include <string.h>

int main(void)
{
    het_error err = { 0 };
    const size_t sizes[] = { 1, 63, 64, 4097, 1 << 20, 3, (2u << 20) - 5 };
    const int n = (int)(sizeof sizes / sizeof sizes[0]);
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (sizes[i] + 63) & ~(size_t)63;
    struct het_panel_arena *a = het_panel_arena_new(total, &err);
    CHECK(a != NULL, "arena of %zu bytes: %s", total, err.msg);
    if (!a) return het_test_finish();
    uint8_t *piece[16];
    for (int i = 0; i < n; i++) {
        piece[i] = het_panel_arena_take(a, sizes[i]);
        CHECK(piece[i] != NULL, "piece %d of %zu bytes fits", i, sizes[i]);
        if (!piece[i]) continue;
        CHECK(((uintptr_t)piece[i] & 63) == 0, "piece %d is 64-byte aligned", i);
        if (i > 0 && piece[i - 1])
            CHECK(piece[i] >= piece[i - 1] + sizes[i - 1], "piece %d starts after piece %d ends", i, i - 1);
        memset(piece[i], i + 1, sizes[i]);
    }
    for (int i = 0; i < n; i++)
        if (piece[i]) CHECK(piece[i][0] == i + 1 && piece[i][sizes[i] - 1] == i + 1, "piece %d kept its bytes", i);
    /* the mapping is rounded up to 2 MiB: what is left of it fits, then nothing */
    const size_t left = ((total + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1)) - total;
    uint8_t *rest = left ? het_panel_arena_take(a, left) : NULL;
    CHECK(!left || rest != NULL, "the rounding's %zu bytes fit", left);
    if (rest) memset(rest, 0xee, left);
    CHECK(het_panel_arena_take(a, 1) == NULL, "a full arena refuses one more byte");
    CHECK(het_panel_arena_take(a, SIZE_MAX) == NULL, "and SIZE_MAX bytes");
    for (int i = 0; i < n; i++)
        if (piece[i]) het_panel_arena_put(a);
    if (rest) het_panel_arena_put(a);
    return het_test_finish();
}
