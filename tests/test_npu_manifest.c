/*
 * test_npu_manifest.c — kernel packs and the amdxdna ABI header.
 *
 * The good fixture pack (tests/data/npu/good) loads with every field as
 * written; its kernels' binaries load (PDI out of the xclbin's
 * AIE_PARTITION, instruction words from raw and from hex text) and kernel
 * choice per M follows the rule in npu_manifest.h. Malformed manifests —
 * bad JSON, a missing or mistyped field, out-of-range numbers, unknown
 * fields, bad argument lists, missing files, a file that is not an xclbin —
 * are each refused with one line naming the JSON field. act_group: the
 * version-1 fixture's int8 kernels are per-row (act_group = k) and its bf16
 * one has none; version 2 requires it on int8 kernels (32 or k), refuses it
 * on bf16 kernels and in version 1; kernel choice matches it; the
 * "act_group" argument word is parsed. Truncated and
 * out-of-bounds xclbins are refused. The ABI header compiles here with its
 * static assertions (sizes, offsets and ioctl numbers of the kernel uAPI)
 * and its command-header packing is checked at run time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/npu/amdxdna_abi.h"
#include "devices/npu/npu_manifest.h"
#include "testutil.h"

static char good_dir[4096];

static void check_abi(void)
{
    const uint32_t h = xdna_cmd_header(XDNA_ERT_START_NPU, 9, XDNA_ERT_STATE_NEW);
    CHECK(h == ((20u << 23) | (9u << 12) | 1u), "command header 0x%08x", h);
    CHECK(xdna_cmd_state(h | 0x3) == 3, "state field");
    CHECK(sizeof(struct xdna_exec_cmd) == 56 && XDNA_IOCTL_EXEC_CMD == 0xC0386446u, "exec_cmd");
}

static void check_good(void)
{
    struct npu_kpack p;
    het_error err = {0};
    enum het_status st = npu_kpack_load(good_dir, &p, &err);
    CHECK(st == HET_OK, "good pack: %s", err.msg);
    if (st != HET_OK) return;
    CHECK(p.n == 3 && strcmp(p.device, "xdna1") == 0 && p.switch_us == 1800.0, "top level: n %d device %s switch %g",
          p.n, p.device, p.switch_us);
    const struct npu_kernel_desc *k0 = &p.k[0], *k1 = &p.k[1];
    CHECK(k0->act_group == 64 && k1->act_group == 64 && p.k[2].act_group == 64, "version 1: per-row (act_group = k)");
    CHECK(strcmp(k0->name, "gemv_q4_64x64") == 0 && k0->wfmt == HET_NPU_W_Q4 && k0->act == HET_NPU_ACT_INT8 &&
          k0->m_tile == 1 && k0->K == 64 && k0->N == 64 && strcmp(k0->kernel_name, "MLIR_AIE") == 0 && k0->n_args == 6,
          "kernel 0 fields");
    CHECK(k0->args[0].kind == NPU_ARG_OPCODE && k0->args[0].value == 3 && k0->args[3].kind == NPU_ARG_ACT &&
          k0->args[5].kind == NPU_ARG_OUT, "default argument list");
    CHECK(k1->wfmt == HET_NPU_W_I8 && k1->m_tile == 32 && k1->tiles == 16 && k1->n_args == 7 &&
          k1->args[6].kind == NPU_ARG_U32 && k1->args[6].value == 7, "kernel 1 fields");

    /* choice of M tile */
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 64, 64, 64, 1) == &p.k[0], "M=1 -> m_tile 1");
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 64, 64, 64, 20) == &p.k[2], "M=20 -> m_tile 8");
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 64, 64, 64, 5) == &p.k[0], "M=5 -> m_tile 1");
    CHECK(npu_kpack_find(&p, HET_NPU_W_I8, HET_NPU_ACT_INT8, 64, 64, 64, 3) == &p.k[1], "i8 M=3 -> only kernel");
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 64, 64, 96, 1) == NULL, "N=96 has no kernel");
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_BF16, 0, 64, 64, 1) == NULL, "bf16 has no kernel");
    CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 32, 64, 64, 1) == NULL, "per-row kernels for act_group 32");

    /* binaries */
    struct npu_kbin b0, b1;
    st = npu_kbin_load(k0, &b0, &err);
    CHECK(st == HET_OK, "kernel 0 binaries: %s", err.msg);
    if (st == HET_OK) {
        bool pdi_ok = b0.pdi_size == 64;
        for (size_t i = 0; pdi_ok && i < 64; i++) pdi_ok = b0.pdi[i] == (uint8_t)((i * 37 + 11) & 0xFF);
        CHECK(pdi_ok && b0.max_opc == 2048 && b0.column_width == 1, "PDI of kernel 0 (%zu bytes, opc %u, width %u)",
              b0.pdi_size, b0.max_opc, b0.column_width);
        CHECK(b0.n_insts == 6 && b0.insts[3] == 0xdeadbeefu, "raw instruction words");
    }
    st = npu_kbin_load(k1, &b1, &err);
    CHECK(st == HET_OK, "kernel 1 binaries: %s", err.msg);
    if (st == HET_OK) {
        CHECK(b1.pdi_size == 64 && b1.pdi[0] == b0.pdi[63] && b1.column_width == 4, "PDI of kernel 1");
        CHECK(b1.n_insts == 6 && memcmp(b1.insts, b0.insts, 24) == 0, "hex text words equal the raw ones");
    }
    npu_kbin_free(&b0);
    npu_kbin_free(&b1);
    npu_kpack_free(&p);
    npu_kpack_free(NULL);
}

/* A one-kernel version-2 manifest with one field replaced (or removed when value is NULL). */
static char *manifest_with(const char *field, const char *value)
{
    static const char *fields[][2] = {
        {"name", "\"k\""}, {"op", "\"matmul\""}, {"weights", "\"q4\""}, {"act", "\"int8\""}, {"act_group", "32"},
        {"m_tile", "1"}, {"k", "64"}, {"n", "64"}, {"xclbin", "\"gemv_q4_64x64.xclbin\""},
        {"insts", "\"gemv_q4_64x64.insts.bin\""},
    };
    char *s = malloc(4096);
    int n = snprintf(s, 4096, "{\"format\": \"het-npu-kernels\", \"version\": 2, \"kernels\": [{");
    bool first = true, replaced = false;
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        const char *v = fields[i][1];
        if (strcmp(fields[i][0], field) == 0) {
            replaced = true;
            if (!value) continue;
            v = value;
        }
        n += snprintf(s + n, 4096 - (size_t)n, "%s\"%s\": %s", first ? "" : ", ", fields[i][0], v);
        first = false;
    }
    if (!replaced && value) n += snprintf(s + n, 4096 - (size_t)n, ", \"%s\": %s", field, value);
    snprintf(s + n, 4096 - (size_t)n, "}]}");
    return s;
}

static void expect_refused(const char *json, const char *want1, const char *want2, const char *what)
{
    struct npu_kpack p;
    het_error err = {0};
    enum het_status st = npu_kpack_parse(json, strlen(json), good_dir, &p, &err);
    CHECK(st == HET_ERR_FORMAT && strstr(err.msg, want1) && (!want2 || strstr(err.msg, want2)) &&
          strchr(err.msg, '\n') == NULL, "%s: got %s '%s' (want '%s'%s%s)", what, het_status_name(st), err.msg, want1,
          want2 ? " and " : "", want2 ? want2 : "");
    if (st == HET_OK) npu_kpack_free(&p);
}

static void check_malformed(void)
{
    static const struct { const char *field, *value, *want1, *want2; } cases[] = {
        { "weights", "\"q5\"",       "kernels[0]", "'weights' = 'q5' is not one of q4, i8" },
        { "weights", NULL,           "kernels[0]", "field 'weights' is missing" },
        { "k",       "172",          "kernels[0]", "'k' = 172 is not a multiple of 32" },
        { "k",       "\"64\"",       "kernels[0]", "'k' must be an integer" },
        { "n",       "-32",          "kernels[0]", "'n' = -32 is outside" },
        { "m_tile",  "0",            "kernels[0]", "'m_tile' = 0 is outside 1..128" },
        { "m_tile",  "1.5",          "kernels[0]", "'m_tile' must be an integer" },
        { "op",      "\"conv\"",     "kernels[0]", "'op' = 'conv'" },
        { "act",     "\"fp8\"",      "kernels[0]", "'act' = 'fp8'" },
        { "name",    "\"\"",         "kernels[0]", "'name' must be 1.." },
        { "m_tiles", "4",            "kernels[0]", "unknown field 'm_tiles'" },
        { "tiles",   "99",           "kernels[0]", "'tiles' = 99" },
        { "args",    "[\"act\", \"out\"]",               "kernels[0].args", "act, weights and out exactly once" },
        { "args",    "[\"act\", \"weights\", \"out\", \"out\"]", "kernels[0].args", "exactly once" },
        { "args",    "[\"act\", \"weights\", \"out\", \"u32:99999999999\"]", "kernels[0].args[3]", "bad number" },
        { "args",    "[\"act\", \"weights\", \"bias\"]", "kernels[0].args[2]", "'bias' is not an argument" },
        { "args",    "\"act\"",      "kernels[0].args", "must be an array" },
        { "xclbin",  "\"nowhere.xclbin\"",               "kernels[0]", "'xclbin'" },
        { "xclbin",  "\"gemv_q4_64x64.insts.bin\"",      "kernels[0]", "is not an xclbin" },
        { "insts",   "\"manifest.json\"",                "kernels[0]", "not whole u32 words" },
        { "xclbin",  "42",           "kernels[0]", "'xclbin' must be a string" },
        { "act_group", NULL,         "kernels[0]", "field 'act_group' is missing" },
        { "act_group", "48",         "kernels[0]", "'act_group' = 48 is neither 32 nor k (64)" },
        { "act_group", "128",        "kernels[0]", "'act_group' = 128 is neither 32 nor k (64)" },
        { "act_group", "0",          "kernels[0]", "'act_group' = 0 is outside" },
        { "act_group", "\"row\"",    "kernels[0]", "'act_group' must be an integer" },
        { "args",    "[\"act\", \"weights\", \"out\", \"act_groups\"]", "kernels[0].args[3]", "is not an argument" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *m = manifest_with(cases[i].field, cases[i].value);
        char what[96];
        snprintf(what, sizeof what, "%s = %s", cases[i].field, cases[i].value ? cases[i].value : "(missing)");
        expect_refused(m, cases[i].want1, cases[i].want2, what);
        free(m);
    }
    /* top level */
    expect_refused("[1, 2]", "top level", "must be an object", "array at top");
    expect_refused("{\"format\": \"onnx\", \"version\": 1, \"kernels\": []}", "format", "het-npu-kernels", "format");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 3, \"kernels\": []}", "version", "not supported",
                   "version");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 1, \"kernels\": []}", "kernels", "1..4096",
                   "empty kernels");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 1}", "kernels", "must be an array", "no kernels");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 1, \"device\": \"tpu\", \"kernels\": [{}]}",
                   "top level", "'device' = 'tpu'", "device");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 1, \"switch_us\": -5, \"kernels\": [{}]}",
                   "switch_us", "0..1e7", "switch_us");
    expect_refused("{\"format\": \"het-npu-kernels\", \"version\": 1, \"kernels\": [7]}", "kernels[0]",
                   "must be an object", "kernel not an object");
    expect_refused("{\"format\": \"het-npu-kernels\", \"format\": \"x\", \"version\": 1, \"kernels\": [{}]}",
                   "line 1", NULL, "duplicate key");
    /* two kernels with one name */
    char *m = manifest_with("name", "\"dup\"");
    char *close = strrchr(m, ']');
    char kernel[1024];
    const char *open = strchr(m, '[');
    snprintf(kernel, sizeof kernel, "%.*s", (int)(close - open - 1), open + 1);
    char two[4096];
    snprintf(two, sizeof two, "{\"format\": \"het-npu-kernels\", \"version\": 2, \"kernels\": [%s, %s]}", kernel, kernel);
    expect_refused(two, "kernels[1].name", "repeats kernels[0]", "duplicate name");
    free(m);

    /* from disk */
    struct npu_kpack p;
    het_error err = {0};
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", het_test_source("tests/data/npu/bad_syntax"));
    CHECK(npu_kpack_load(dir, &p, &err) == HET_ERR_FORMAT && strstr(err.msg, "line 2"), "bad syntax: %s", err.msg);
    snprintf(dir, sizeof dir, "%s", het_test_source("tests/data/npu/missing_file"));
    CHECK(npu_kpack_load(dir, &p, &err) == HET_ERR_FORMAT && strstr(err.msg, "kernels[0]") &&
          strstr(err.msg, "nowhere.xclbin"), "missing file: %s", err.msg);
    snprintf(dir, sizeof dir, "%s", het_test_source("tests/data/npu/no_such_pack"));
    CHECK(npu_kpack_load(dir, &p, &err) == HET_ERR_IO && strstr(err.msg, "manifest.json"), "no pack: %s", err.msg);
}

/* Parse a manifest that must load; returns its kernel 0's act_group (-1 on failure). */
static int64_t parsed_act_group(const char *json, const char *what, struct npu_kpack *p)
{
    het_error err = {0};
    enum het_status st = npu_kpack_parse(json, strlen(json), good_dir, p, &err);
    CHECK(st == HET_OK, "%s: %s", what, err.msg);
    return st == HET_OK ? p->k[0].act_group : -1;
}

static void check_act_group(void)
{
    struct npu_kpack p;
    char *m = manifest_with("act_group", "32");
    CHECK(parsed_act_group(m, "act_group 32", &p) == 32, "act_group 32 not kept");
    if (p.n == 1) {
        CHECK(npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 32, 64, 64, 1) == &p.k[0] &&
              npu_kpack_find(&p, HET_NPU_W_Q4, HET_NPU_ACT_INT8, 64, 64, 64, 1) == NULL, "choice by act_group");
        npu_kpack_free(&p);
    }
    free(m);
    m = manifest_with("act_group", "64");
    CHECK(parsed_act_group(m, "act_group = k", &p) == 64, "act_group 64 (= k) not kept");
    if (p.n == 1) npu_kpack_free(&p);
    free(m);
    m = manifest_with("args", "[\"opcode:3\", \"instr\", \"ninstr\", \"act\", \"weights\", \"out\", \"act_group\"]");
    CHECK(parsed_act_group(m, "act_group argument", &p) == 32, "act_group argument");
    if (p.n == 1) {
        CHECK(p.k[0].n_args == 7 && p.k[0].args[6].kind == NPU_ARG_ACT_GROUP, "act_group argument word");
        npu_kpack_free(&p);
    }
    free(m);
    /* bf16 kernels: no activation scales, so no act_group (field or argument) */
    const char *bf = "{\"format\": \"het-npu-kernels\", \"version\": 2, \"kernels\": [{\"name\": \"b\", "
                     "\"op\": \"matmul\", \"weights\": \"q4\", \"act\": \"bf16\", \"m_tile\": 1, \"k\": 64, \"n\": 64, "
                     "\"xclbin\": \"gemv_q4_64x64.xclbin\", \"insts\": \"gemv_q4_64x64.insts.bin\"%s}]}";
    char json[1024];
    snprintf(json, sizeof json, bf, "");
    CHECK(parsed_act_group(json, "bf16 kernel", &p) == 0, "bf16 kernel act_group");
    if (p.n == 1) npu_kpack_free(&p);
    snprintf(json, sizeof json, bf, ", \"act_group\": 32");
    expect_refused(json, "kernels[0]", "'act_group' applies to int8 kernels only", "bf16 with act_group");
    snprintf(json, sizeof json, bf, ", \"args\": [\"act\", \"weights\", \"out\", \"act_group\"]");
    expect_refused(json, "kernels[0].args", "int8 kernels only", "bf16 with an act_group argument");
    /* version 1 predates the field: its kernels are per-row, stating a group is an error */
    m = manifest_with("act_group", "32");
    char *v = strstr(m, "\"version\": 2");
    if (v) v[11] = '1';
    expect_refused(m, "kernels[0]", "'act_group' needs \"version\": 2", "act_group in version 1");
    free(m);
}

static void check_xclbin(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%.3000s/gemv_q4_64x64.xclbin", good_dir);
    FILE *f = fopen(path, "rb");
    uint8_t buf[2048];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n == 840, "fixture xclbin size %zu", n);
    struct npu_kbin b = {0};
    het_error err = {0};
    CHECK(npu_xclbin_pdi(buf, n, &b, &err) == HET_OK && b.pdi_size == 64, "good xclbin: %s", err.msg);
    npu_kbin_free(&b);
    CHECK(npu_xclbin_pdi(buf, 300, &b, &err) == HET_ERR_FORMAT, "truncated header accepted");
    CHECK(npu_xclbin_pdi(buf, n - 10, &b, &err) == HET_ERR_FORMAT && strstr(err.msg, "length"),
          "truncated file: %s", err.msg);
    uint8_t bad[2048];
    memcpy(bad, buf, n);
    bad[0x1C8] = 18;                                   /* section kind PDI, not AIE_PARTITION */
    CHECK(npu_xclbin_pdi(bad, n, &b, &err) == HET_ERR_FORMAT && strstr(err.msg, "AIE_PARTITION"), "no partition: %s",
          err.msg);
    memcpy(bad, buf, n);
    bad[0x1F0 + 0xB8 + 0x10] = 0xFF;                   /* PDI image size past the section */
    bad[0x1F0 + 0xB8 + 0x11] = 0x7F;
    CHECK(npu_xclbin_pdi(bad, n, &b, &err) == HET_ERR_FORMAT && strstr(err.msg, "PDI image"), "PDI bounds: %s", err.msg);
    memcpy(bad, buf, n);
    bad[0x1C0] = 0xFF;                                 /* section count */
    bad[0x1C1] = 0xFF;
    CHECK(npu_xclbin_pdi(bad, n, &b, &err) == HET_ERR_FORMAT && strstr(err.msg, "section count"), "count: %s", err.msg);
    memcpy(bad, buf, n);
    bad[3] = 'X';
    CHECK(npu_xclbin_pdi(bad, n, &b, &err) == HET_ERR_FORMAT && strstr(err.msg, "magic"), "magic: %s", err.msg);

    const char *txt = "0x00000001\n  ff\nDEADBEEF\n\n";
    CHECK(npu_insts_parse((const uint8_t *)txt, strlen(txt), true, &b, &err) == HET_OK && b.n_insts == 3 &&
          b.insts[1] == 0xff && b.insts[2] == 0xdeadbeefu, "hex text: %s", err.msg);
    const char *badtxt = "00000001\nxyz\n";
    CHECK(npu_insts_parse((const uint8_t *)badtxt, strlen(badtxt), true, &b, &err) == HET_ERR_FORMAT &&
          strstr(err.msg, "line 2"), "bad hex: %s", err.msg);
    CHECK(npu_insts_parse((const uint8_t *)"abc", 3, false, &b, &err) == HET_ERR_FORMAT, "3 raw bytes accepted");
    npu_kbin_free(&b);
}

int main(void)
{
    snprintf(good_dir, sizeof good_dir, "%s", het_test_source("tests/data/npu/good"));
    check_abi();
#ifndef HET_HAVE_JANSSON
    struct npu_kpack p;
    het_error err = {0};
    CHECK(npu_kpack_parse("{}", 2, ".", &p, &err) == HET_ERR_UNSUPPORTED, "no jansson: %s", err.msg);
    check_xclbin();
    printf("jansson not available: manifest parsing not tested\n");
    return het_test_finish();
#else
    check_good();
    check_malformed();
    check_act_group();
    check_xclbin();
    return het_test_finish();
#endif
}
