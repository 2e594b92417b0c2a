/*
 * peak_amx.c — the AMX level's int8 peak: tdpbssd on full tiles (16 x 64
 * bytes of A, 16 x 64 bytes of B) into four C tiles, each pass four
 * independent products, so the tile unit never waits on one result. The
 * contract of cpu_peak.h: returns the operations performed.
 */
#include <immintrin.h>

#include "devices/cpu/arch/amx/amx_tilecfg.h"
#include "devices/cpu/cpu_peak.h"

/* every tile 16 rows x 64 bytes */
static const struct het_amx_tilecfg het_amx_peak_cfg __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

double het_peak_int8_amx(int64_t iters, uint32_t *sink)
{
    int8_t src[16 * 64] __attribute__((aligned(64)));
    for (int i = 0; i < 16 * 64; i++) src[i] = (int8_t)(i % 7 - 3);
    int32_t out[16 * 16] __attribute__((aligned(64)));
    _tile_loadconfig(&het_amx_peak_cfg);
    _tile_loadd(4, src, 64);
    _tile_loadd(5, src, 64);
    _tile_loadd(6, src, 64);
    _tile_loadd(7, src, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t i = 0; i < iters; i++) {
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbssd(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    *sink += (uint32_t)out[0];
    return (double)iters * 4 * 16 * 16 * 64 * 2;
}
