/*
 * npu_xclbin.c — the one piece of an xclbin het needs: the PDI image in its
 * AIE_PARTITION section, which amdxdna loads into a hardware context
 * (CONFIG_HWCTX with the PDI in a device-heap BO), plus the partition's
 * width and operations per cycle for context creation.
 *
 * axlf container (little endian): magic "xclbin2\0" at 0; the header at
 * 0x130 (file length u64 at +0x00, section count u32 at +0x90); 40-byte
 * section headers from 0x1C8 (kind u32 at +0, offset u64 at +24, size u64
 * at +32). AIE_PARTITION (kind 32): operations_per_cycle u32 at +0x08,
 * column_width u16 at +0x20, the PDI array {count u32, offset u32} at +0x78
 * (offsets relative to the section); each 96-byte PDI entry has its image
 * array {size u32, offset u32} at +0x10. Every offset and size is checked
 * against the file before use.
 */
#include "devices/npu/npu_manifest.h"

#include <stdlib.h>
#include <string.h>

#define AXLF_HEADER_OFF    0x130u
#define AXLF_NSECT_OFF     (AXLF_HEADER_OFF + 0x90u)
#define AXLF_SECTIONS_OFF  0x1C8u
#define AXLF_SECTION_SIZE  40u
#define KIND_AIE_PARTITION 32u
#define PART_OPC_OFF       0x08u
#define PART_COLW_OFF      0x20u
#define PART_PDI_OFF       0x78u
#define PART_MIN_SIZE      0xB8u
#define PDI_ENTRY_SIZE     96u
#define PDI_IMAGE_OFF      0x10u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* [off, off + len) inside [0, size)? */
static bool inside(uint64_t off, uint64_t len, uint64_t size) { return off <= size && len <= size - off; }

static enum het_status find_partition(const uint8_t *f, size_t size, const uint8_t **sec, uint64_t *sec_size,
                                      het_error *err)
{
    if (size < AXLF_SECTIONS_OFF || memcmp(f, "xclbin2\0", 8) != 0)
        return het_error_set(err, HET_ERR_FORMAT, "not an xclbin (no \"xclbin2\" magic or too short)");
    const uint64_t len = rd64(f + AXLF_HEADER_OFF);
    if (len > size) return het_error_set(err, HET_ERR_FORMAT, "header length %llu exceeds the file (%zu bytes)",
                                         (unsigned long long)len, size);
    const uint32_t ns = rd32(f + AXLF_NSECT_OFF);
    if (ns == 0 || ns > 4096 || !inside(AXLF_SECTIONS_OFF, (uint64_t)ns * AXLF_SECTION_SIZE, size))
        return het_error_set(err, HET_ERR_FORMAT, "section count %u does not fit the file", ns);
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *h = f + AXLF_SECTIONS_OFF + (size_t)i * AXLF_SECTION_SIZE;
        if (rd32(h) != KIND_AIE_PARTITION) continue;
        const uint64_t off = rd64(h + 24), sz = rd64(h + 32);
        if (!inside(off, sz, size) || sz < PART_MIN_SIZE)
            return het_error_set(err, HET_ERR_FORMAT, "AIE_PARTITION section [%llu, +%llu) is outside the file or too "
                                 "small", (unsigned long long)off, (unsigned long long)sz);
        *sec = f + off;
        *sec_size = sz;
        return HET_OK;
    }
    return het_error_set(err, HET_ERR_FORMAT, "no AIE_PARTITION section (not an NPU xclbin)");
}

enum het_status npu_xclbin_pdi(const uint8_t *file, size_t size, struct npu_kbin *out, het_error *err)
{
    const uint8_t *sec = NULL;
    uint64_t ssz = 0;
    enum het_status st = find_partition(file, size, &sec, &ssz, err);
    if (st != HET_OK) return st;
    const uint32_t n_pdi = rd32(sec + PART_PDI_OFF), pdi_off = rd32(sec + PART_PDI_OFF + 4);
    if (n_pdi == 0 || n_pdi > 64 || !inside(pdi_off, (uint64_t)n_pdi * PDI_ENTRY_SIZE, ssz))
        return het_error_set(err, HET_ERR_FORMAT, "AIE_PARTITION: PDI array (%u at %u) is empty or outside the section",
                             n_pdi, pdi_off);
    const uint8_t *e = sec + pdi_off;
    const uint32_t img_size = rd32(e + PDI_IMAGE_OFF), img_off = rd32(e + PDI_IMAGE_OFF + 4);
    if (img_size == 0 || !inside(img_off, img_size, ssz))
        return het_error_set(err, HET_ERR_FORMAT, "AIE_PARTITION: PDI image [%u, +%u) is empty or outside the section",
                             img_off, img_size);
    free(out->pdi);
    out->pdi = malloc(img_size);
    if (!out->pdi) return het_error_set(err, HET_ERR_NOMEM, "out of memory for a %u-byte PDI", img_size);
    memcpy(out->pdi, sec + img_off, img_size);
    out->pdi_size = img_size;
    out->max_opc = rd32(sec + PART_OPC_OFF);
    out->column_width = rd16(sec + PART_COLW_OFF);
    return HET_OK;
}
