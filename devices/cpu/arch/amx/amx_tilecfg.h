/*
 * amx_tilecfg.h — the 64-byte operand of ldtilecfg (palette 1): each tile's
 * bytes per row and rows. The arch/amx files keep their configurations as
 * static constants of this type: GCC dropped the stores into a local copy
 * before ldtilecfg read it, and the tiles then faulted.
 */
#ifndef HET_CPU_AMX_TILECFG_H
#define HET_CPU_AMX_TILECFG_H

#include <stdint.h>

struct het_amx_tilecfg {
    uint8_t  palette, start_row;
    uint8_t  reserved[14];
    uint16_t colsb[16];
    uint8_t  rows[16];
};

_Static_assert(sizeof(struct het_amx_tilecfg) == 64, "ldtilecfg reads 64 bytes");

#endif /* HET_CPU_AMX_TILECFG_H */
