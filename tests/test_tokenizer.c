/*
 * test_tokenizer.c — tokenizers against llama.cpp's vectors and hand-derived cases.
 *
 * 1. Every shared/models/vocab/ggml-vocab-*.gguf with its .inp/.out pair:
 *    the .inp cases (separated by "\n__ggml_vocab_test__\n") must give the
 *    .out ids exactly (add_special = parse_special = false, as llama.cpp's
 *    test-tokenizer-0 produced them), and SPM/BPE output must detokenise
 *    back to the input (SPM: with the automatic leading space).
 * 2. synthetic/vocab-qwen3.gguf (pre "qwen2"), which has no vectors: the
 *    expected ids below were derived independently of this code, with a
 *    short Python script using the `regex` module (the Qwen2 pattern as
 *    written in Qwen's tokenizer.json, \p classes and all) to pre-tokenize,
 *    GPT-2's byte table, and naive lowest-rank-first merging over
 *    tokenizer.ggml.merges read from the same file; special tokens were
 *    split off first by exact text. Spot checks by hand: "Hello" = 9707,
 *    " world" = 1879, "\n" = 198, digits are single tokens (15..24 for 0..9)
 *    because the Qwen2 pattern takes \p{N} one at a time.
 * 3. stories260K.gguf: "Once upon a time" with BOS = <s> ▁Once ▁upon ▁a ▁time.
 * 4. A small synthetic SPM vocabulary written with the GGUF writer, to pin
 *    merge order by score, byte fallback, parse_special and the errors.
 * 5. Random inputs (malformed UTF-8 included) through SPM, BPE and WPM
 *    vocabularies: every call succeeds with in-range ids, and SPM and BPE
 *    detokenise random valid UTF-8 back to the input.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "het/gguf.h"
#include "het/tokenizer.h"
#include "tests/testutil.h"

#define SEPARATOR "\n__ggml_vocab_test__\n"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    if (len) *len = (size_t)n;
    return buf;
}

static het_tokenizer *load_tokenizer(const char *path, het_gguf **g_out)
{
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(path, &err);
    CHECK(g != NULL, "open %s: %s", path, err.msg);
    if (!g) return NULL;
    het_tokenizer *t = het_tokenizer_from_gguf(g, &err);
    CHECK(t != NULL, "tokenizer from %s: %s", path, err.msg);
    if (!t) het_gguf_close(g);
    else *g_out = g;
    return t;
}

static bool same_ids(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof *a) == 0);
}

static void print_ids(const char *what, const int32_t *ids, int32_t n)
{
    fprintf(stderr, "  %s:", what);
    for (int32_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 64 ? " ...\n" : "\n");
}

/* Concatenated pieces of ids; malloc'ed, *len bytes. */
static char *detokenize(const het_tokenizer *t, const int32_t *ids, int32_t n, size_t *len)
{
    size_t cap = 64, k = 0;
    char *out = malloc(cap);
    for (int32_t i = 0; i < n && out; i++) {
        int r = het_token_to_piece(t, ids[i], out + k, (int)(cap - k), false);
        if (r < 0) {
            while (cap - k < (size_t)-r) cap *= 2;
            out = realloc(out, cap);
            if (!out) break;
            r = het_token_to_piece(t, ids[i], out + k, (int)(cap - k), false);
        }
        k += (size_t)(r > 0 ? r : 0);
    }
    *len = k;
    return out;
}

static int32_t parse_ids(const char *line, size_t len, int32_t *out, int32_t cap)
{
    int32_t n = 0;
    const char *p = line, *end = line + len;
    while (p < end && n < cap) {
        while (p < end && *p == ' ') p++;
        if (p >= end) break;
        out[n++] = (int32_t)strtol(p, (char **)&p, 10);
    }
    return n;
}

/* One vocab: every case of .inp against .out; returns cases passed. */
static void run_vocab_file(const char *dir, const char *name)
{
    char path[1024], inp_path[1100], out_path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    size_t inp_len, out_len;
    char *inp = read_file(inp_path, &inp_len), *outs = read_file(out_path, &out_len);
    if (!inp || !outs) {
        free(inp);
        free(outs);
        return;   /* a vocab without vectors */
    }
    het_gguf *g = NULL;
    het_tokenizer *t = load_tokenizer(path, &g);
    if (!t) {
        free(inp);
        free(outs);
        return;
    }
    bool lossless = het_tokenizer_kind(t) != HET_TOKENIZER_WPM;
    bool spm = het_tokenizer_kind(t) == HET_TOKENIZER_SPM;
    int n_cases = 0, passed = 0, rt_passed = 0;
    const char *ip = inp, *op = outs;
    int32_t expect[4096];
    for (;;) {
        const char *sep = strstr(ip, SEPARATOR);
        const char *nl = memchr(op, '\n', (size_t)(outs + out_len - op));
        if (!sep || !nl) break;
        size_t case_len = (size_t)(sep - ip);
        int32_t n_expect = parse_ids(op, (size_t)(nl - op), expect, 4096);
        int32_t *ids = NULL, n_ids = 0;
        het_error err = { 0 };
        enum het_status st = het_tokenize(t, ip, case_len, false, false, &ids, &n_ids, &err);
        bool ok = st == HET_OK && same_ids(ids, n_ids, expect, n_expect);
        CHECK(ok, "%s case %d (\"%.*s\"): %s", name, n_cases, (int)(case_len > 60 ? 60 : case_len), ip,
              st == HET_OK ? "ids differ" : err.msg);
        if (!ok && st == HET_OK) {
            print_ids("expected", expect, n_expect);
            print_ids("got     ", ids, n_ids);
        }
        passed += ok;
        if (lossless && st == HET_OK) {
            size_t dlen;
            char *d = detokenize(t, ids, n_ids, &dlen);
            size_t skip = spm && case_len > 0 && dlen > 0 && d[0] == ' ';   /* the added space prefix */
            bool rt = d && dlen - skip == case_len && memcmp(d + skip, ip, case_len) == 0;
            CHECK(rt, "%s case %d: detokenised text differs from the input", name, n_cases);
            rt_passed += rt;
            free(d);
        }
        free(ids);
        n_cases++;
        ip = sep + strlen(SEPARATOR);
        op = nl + 1;
    }
    CHECK(n_cases > 0, "%s: no test cases found", name);
    printf("%-34s %2d/%2d cases", name, passed, n_cases);
    if (lossless) printf(", round trip %2d/%2d", rt_passed, n_cases);
    printf("\n");
    het_tokenizer_free(t);
    het_gguf_close(g);
    free(inp);
    free(outs);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void test_vocab_vectors(void)
{
    const char *dir = het_test_shared("models/vocab");
    char dir_copy[1024];
    snprintf(dir_copy, sizeof dir_copy, "%s", dir);
    DIR *d = opendir(dir_copy);
    if (!d) het_test_skip("no tokenizer fixtures at %s", dir_copy);
    char *names[64];
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 64;) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0 && len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 10, "expected at least 10 vocab files in %s, found %d", dir_copy, n);
    for (int i = 0; i < n; i++) {
        run_vocab_file(dir_copy, names[i]);
        free(names[i]);
    }
}

/* ---- qwen3 ----------------------------------------------------------------- */

struct qcase {
    const char   *text;
    bool          parse_special;
    const int32_t ids[40];
    int32_t       n;
};

static const struct qcase qwen_cases[] = {
    { "Hello world", false,
      { 9707, 1879 }, 2 },
    { "Hello, world! 123 4567", false,
      { 9707, 11, 1879, 0, 220, 16, 17, 18, 220, 19, 20, 21, 22 }, 13 },
    { "  leading spaces\n\n\ttabs and trailing   ", false,
      { 220, 6388, 12621, 271, 3244, 3435, 323, 27748, 262 }, 9 },
    /* naïve café 日本語 🙂 */
    { "na\xc3\xafve caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x82", false,
      { 3376, 37572, 586, 51950, 75402, 21894, 102819, 27484 }, 8 },
    /* contractions are matched case-insensitively; BPE then splits "'LL" */
    { "I'm sure WE'LL see they'RE fine", false,
      { 40, 2776, 2704, 19677, 6, 4086, 1490, 807, 94153, 6915 }, 10 },
    { "x=f(y);\n    return x*2  # done", false,
      { 87, 18111, 7021, 317, 262, 470, 856, 9, 17, 220, 671, 2814 }, 12 },
    /* chat markup: control tokens only with parse_special; without it the text is plain BPE */
    { "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", true,
      { 151644, 872, 198, 9707, 0, 151645, 198, 151644, 77091, 198 }, 10 },
    { "<|im_start|>user\nHello!<|im_end|>\n", false,
      { 27, 91, 318, 4906, 91, 29, 872, 198, 9707, 86932, 91, 318, 6213, 91, 397 }, 15 },
    /* <think> and </think> are user-defined: split out even without parse_special */
    { "<think>\n\n</think>\n\nOK", false,
      { 151667, 271, 151668, 271, 3925 }, 5 },
};

static void check_case(const het_tokenizer *t, const char *label, const char *text, bool add_special,
                       bool parse_special, const int32_t *want, int32_t n_want)
{
    int32_t *ids = NULL, n = 0;
    het_error err = { 0 };
    enum het_status st = het_tokenize(t, text, strlen(text), add_special, parse_special, &ids, &n, &err);
    bool ok = st == HET_OK && same_ids(ids, n, want, n_want);
    CHECK(ok, "%s: \"%s\" (parse_special %d): %s", label, text, parse_special, st == HET_OK ? "ids differ" : err.msg);
    if (!ok && st == HET_OK) {
        print_ids("expected", want, n_want);
        print_ids("got     ", ids, n);
    }
    free(ids);
}

static void test_qwen3(void)
{
    const char *path = het_test_shared("models/synthetic/vocab-qwen3.gguf");
    if (!het_test_file_exists(path)) {
        printf("vocab-qwen3.gguf: missing, skipped\n");
        return;
    }
    het_gguf *g = NULL;
    double t0 = het_test_now_ms();
    het_tokenizer *t = load_tokenizer(path, &g);
    double t1 = het_test_now_ms();
    if (!t) return;
    printf("vocab-qwen3.gguf: %d tokens, tokenizer built in %.1f ms\n", (int)het_tokenizer_n_vocab(t), t1 - t0);
    CHECK(het_tokenizer_kind(t) == HET_TOKENIZER_BPE, "qwen3 kind");
    CHECK(!het_tokenizer_add_bos(t), "qwen3 must not add BOS (add_bos_token = false)");
    CHECK(het_tokenizer_eos(t) == 151645, "qwen3 eos %d", (int)het_tokenizer_eos(t));
    CHECK(het_tokenizer_is_eog(t, 151645) && het_tokenizer_is_eog(t, 151643), "<|im_end|>, <|endoftext|> end generation");
    CHECK(!het_tokenizer_is_eog(t, 151644) && !het_tokenizer_is_eog(t, 9707), "<|im_start|>, Hello do not");
    CHECK(het_tokenizer_is_control(t, 151644), "<|im_start|> is a control token");
    int passed = 0, n = (int)(sizeof qwen_cases / sizeof qwen_cases[0]);
    for (int i = 0; i < n; i++) {
        int before = het_test.failed;
        check_case(t, "qwen3", qwen_cases[i].text, false, qwen_cases[i].parse_special, qwen_cases[i].ids,
                   qwen_cases[i].n);
        passed += het_test.failed == before;
    }
    printf("vocab-qwen3.gguf: %d/%d hand-derived cases\n", passed, n);

    /* control tokens render only when asked to; "Hello" decodes to itself */
    char buf[32];
    CHECK(het_token_to_piece(t, 151644, buf, sizeof buf, false) == 0, "control piece hidden");
    int r = het_token_to_piece(t, 151644, buf, sizeof buf, true);
    CHECK(r == 12 && memcmp(buf, "<|im_start|>", 12) == 0, "control piece shown with special");
    CHECK(het_token_to_piece(t, 151644, buf, 4, true) == -12, "small buffer asks for 12 bytes");
    r = het_token_to_piece(t, 1879, buf, sizeof buf, false);
    CHECK(r == 6 && memcmp(buf, " world", 6) == 0, "\" world\" piece");

    /* a few KB of mixed text: round trip, and the time it takes (informational) */
    char text[8192];
    size_t k = 0;
    static const char chunk[] = "The quick brown fox, 1234 jumps! caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac\n\tx = f(y);  ";
    while (k + sizeof chunk < sizeof text) {
        memcpy(text + k, chunk, sizeof chunk - 1);
        k += sizeof chunk - 1;
    }
    int32_t *ids = NULL, n_ids = 0;
    het_error err = { 0 };
    t0 = het_test_now_ms();
    CHECK(het_tokenize(t, text, k, false, false, &ids, &n_ids, &err) == HET_OK, "big text: %s", err.msg);
    t1 = het_test_now_ms();
    size_t dlen;
    char *d = detokenize(t, ids, n_ids, &dlen);
    CHECK(d && dlen == k && memcmp(d, text, k) == 0, "big text round trip");
    printf("vocab-qwen3.gguf: %zu bytes -> %d tokens in %.2f ms\n", k, (int)n_ids, t1 - t0);
    free(d);
    free(ids);
    het_tokenizer_free(t);
    het_gguf_close(g);
}

/* ---- stories260K ----------------------------------------------------------- */

static void test_stories(void)
{
    const char *path = het_test_shared("models/stories260K.gguf");
    if (!het_test_file_exists(path)) {
        printf("stories260K.gguf: missing, skipped\n");
        return;
    }
    het_gguf *g = NULL;
    het_tokenizer *t = load_tokenizer(path, &g);
    if (!t) return;
    int failed_before = het_test.failed;
    CHECK(het_tokenizer_kind(t) == HET_TOKENIZER_SPM && het_tokenizer_n_vocab(t) == 512, "stories kind/size");
    CHECK(het_tokenizer_add_bos(t) && !het_tokenizer_add_eos(t), "stories: SPM adds BOS by default, not EOS");
    CHECK(het_tokenizer_bos(t) == 1 && het_tokenizer_eos(t) == 2, "stories bos/eos");
    CHECK(het_tokenizer_is_eog(t, 2) && !het_tokenizer_is_eog(t, 1), "stories eog");
    static const int32_t want[] = { 1, 403, 407, 261, 378 };   /* <s> ▁Once ▁upon ▁a ▁time */
    check_case(t, "stories260K", "Once upon a time", true, false, want, 5);
    static const int32_t want_plain[] = { 403, 407, 261, 378 };
    check_case(t, "stories260K", "Once upon a time", false, false, want_plain, 4);
    /* "<s>" in the text is a control token only with parse_special */
    static const int32_t want_special[] = { 1, 1, 403 };
    check_case(t, "stories260K", "<s>Once", true, true, want_special, 3);
    printf("stories260K.gguf: %s\n", het_test.failed == failed_before ? "all checks pass" : "FAILED");
    het_tokenizer_free(t);
    het_gguf_close(g);
}

/* ---- synthetic SPM vocabulary ---------------------------------------------- */

static bool write_vocab(const char *path, const char *model, const char *pre, const char *const *tokens,
                        const float *scores, const int32_t *types, int n)
{
    het_error err = { 0 };
    het_gguf_writer *w = het_gguf_writer_init();
    bool ok = w && het_gguf_writer_set_str(w, "general.architecture", "llama") == HET_OK &&
              het_gguf_writer_set_str(w, "tokenizer.ggml.model", model) == HET_OK &&
              (!pre || het_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre) == HET_OK) &&
              het_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, n) == HET_OK &&
              het_gguf_writer_set_arr(w, "tokenizer.ggml.scores", HET_GGUF_TYPE_FLOAT32, scores, n) == HET_OK &&
              het_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", HET_GGUF_TYPE_INT32, types, n) == HET_OK &&
              het_gguf_writer_set_u32(w, "tokenizer.ggml.seperator_token_id", 0xFFFFFFFFu) == HET_OK &&
              het_gguf_writer_write(w, path, &err) == HET_OK;
    het_gguf_writer_free(w);
    CHECK(ok, "writing %s: %s", path, err.msg);
    return ok;
}

static void test_synthetic_spm(void)
{
    /* ids: 0 <unk>, 1 <s>, 2 </s>, 3..5 bytes 'a','b',0xC3, then pieces */
    static const char *const tokens[] = {
        "<unk>", "<s>", "</s>", "<0x61>", "<0x62>", "<0xC3>", "\xe2\x96\x81", "a", "b", "ab", "\xe2\x96\x81" "a",
        "\xe2\x96\x81" "ab", "bb", "<|user|>",
    };
    static const float scores[] = { 0, 0, 0, 0, 0, 0, -1, -2, -2, -5, -3, -4, -1, 0 };
    static const int32_t types[] = { 2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1, 4 };
    const int n = (int)(sizeof tokens / sizeof tokens[0]);
    char path[] = "/tmp/het_test_tokenizer_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    if (!write_vocab(path, "llama", NULL, tokens, scores, types, n)) {
        unlink(path);
        return;
    }
    het_gguf *g = NULL;
    het_tokenizer *t = load_tokenizer(path, &g);
    if (t) {
        CHECK(het_tokenizer_bos(t) == 1 && het_tokenizer_eos(t) == 2, "defaults bos 1, eos 2");
        /* "▁abb": pairs ▁a (-3), ab (-5), bb (-1): bb first, then ▁a; ▁a+bb is no token */
        static const int32_t w1[] = { 10, 12 };
        check_case(t, "synthetic", "abb", false, false, w1, 2);
        /* "▁ab": ▁a (-3) beats ab (-5), then ▁a+b = ▁ab (-4) */
        static const int32_t w2[] = { 1, 11 };
        check_case(t, "synthetic", "ab", true, false, w2, 2);
        /* "é" = C3 A9: <0xC3> exists, 0xA9 has no byte token -> <unk> */
        static const int32_t w3[] = { 6, 5, 0 };
        check_case(t, "synthetic", "\xc3\xa9", false, false, w3, 3);
        /* user-defined tokens split even without parse_special; text after a special gets the prefix again */
        static const int32_t w4[] = { 10, 13, 10 };
        check_case(t, "synthetic", "a<|user|>a", false, false, w4, 3);
        /* control text: literal without parse_special, the token with it (and a prefix after it) */
        static const int32_t w6[] = { 2, 10 };
        check_case(t, "synthetic", "</s>a", false, true, w6, 2);
        char buf[8];
        CHECK(het_token_to_piece(t, 10, buf, sizeof buf, false) == 2 && memcmp(buf, " a", 2) == 0, "▁a -> \" a\"");
        CHECK(het_token_to_piece(t, 5, buf, sizeof buf, false) == 1 && (unsigned char)buf[0] == 0xC3, "<0xC3> -> byte");
        CHECK(het_token_to_piece(t, 13, buf, sizeof buf, false) == 8, "user-defined renders raw");
        CHECK(het_token_to_piece(t, 99, buf, sizeof buf, false) == 0, "out of range renders nothing");
        CHECK(het_tokenizer_token_text(t, 99) == NULL && strcmp(het_tokenizer_token_text(t, 8), "b") == 0,
              "token_text");
        int32_t *ids = NULL, nids = -1;
        CHECK(het_tokenize(t, "", 0, false, false, &ids, &nids, NULL) == HET_OK && nids == 0, "empty text, no ids");
        free(ids);
        CHECK(het_tokenize(t, "", 0, true, false, &ids, &nids, NULL) == HET_OK && nids == 1 && ids[0] == 1,
              "empty text with add_special gives BOS");
        free(ids);
        het_tokenizer_free(t);
        het_gguf_close(g);
    }

    /* errors: unknown model, unknown pre, missing merges */
    het_error err = { 0 };
    const char *bad[][2] = { { "foo", NULL }, { "gpt2", "no-such-pre" }, { "gpt2", "qwen2" } };
    for (int i = 0; i < 3; i++) {
        if (!write_vocab(path, bad[i][0], bad[i][1], tokens, scores, types, n)) break;
        g = het_gguf_open(path, &err);
        CHECK(g != NULL, "reopen: %s", err.msg);
        if (!g) break;
        err.msg[0] = '\0';
        t = het_tokenizer_from_gguf(g, &err);
        CHECK(t == NULL && err.msg[0] != '\0', "bad vocab %d must fail with a message", i);
        if (t == NULL) printf("expected error: %s\n", err.msg);
        het_tokenizer_free(t);
        het_gguf_close(g);
    }
    het_tokenizer_free(NULL);
    unlink(path);
}

/* Random text: arbitrary bytes, or valid UTF-8 of random code points
 * (ASCII-heavy; no surrogates, no U+2581). Returns the length. */
static size_t random_text(char *buf, size_t cap, bool valid_utf8)
{
    size_t n = het_test_rand_u64() % 120, k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) {
        uint64_t r = het_test_rand_u64();
        if (!valid_utf8) {
            static const char pool[] = " aeb\n\t.,1\xc3\xa9";
            buf[k++] = r % 4 == 0 ? (char)((r >> 8) & 0xFF) : pool[(r >> 8) % (sizeof pool - 1)];
            continue;
        }
        uint32_t cpt;
        switch (r % 4) {
        case 0: cpt = 0x20 + (uint32_t)((r >> 8) % 0x5F); break;
        case 1: cpt = " \n\t\r"[(r >> 8) % 4]; break;
        case 2: cpt = 0x80 + (uint32_t)((r >> 8) % 0x3000); break;
        default: cpt = (uint32_t)((r >> 8) % 0x110000); break;
        }
        if ((cpt >= 0xD800 && cpt <= 0xDFFF) || cpt == 0x2581) cpt = 0xFFFD;   /* SPM renders U+2581 as ' ' */
        if (cpt == 0) cpt = 1;
        if (cpt < 0x80) buf[k++] = (char)cpt;
        else if (cpt < 0x800) {
            buf[k++] = (char)(0xC0 | (cpt >> 6));
            buf[k++] = (char)(0x80 | (cpt & 0x3F));
        } else if (cpt < 0x10000) {
            buf[k++] = (char)(0xE0 | (cpt >> 12));
            buf[k++] = (char)(0x80 | ((cpt >> 6) & 0x3F));
            buf[k++] = (char)(0x80 | (cpt & 0x3F));
        } else {
            buf[k++] = (char)(0xF0 | (cpt >> 18));
            buf[k++] = (char)(0x80 | ((cpt >> 12) & 0x3F));
            buf[k++] = (char)(0x80 | ((cpt >> 6) & 0x3F));
            buf[k++] = (char)(0x80 | (cpt & 0x3F));
        }
    }
    return k;
}

/* n_runs random texts; returns calls that succeeded with in-range ids, and
 * in *rt_ok how many detokenised back to the input (when check_rt). */
static int random_runs(const het_tokenizer *t, const char *name, bool valid_utf8, bool check_rt, int n_runs, int *rt_ok)
{
    bool spm = het_tokenizer_kind(t) == HET_TOKENIZER_SPM;
    int ok_calls = 0;
    *rt_ok = 0;
    for (int run = 0; run < n_runs; run++) {
        char text[600];
        size_t len = random_text(text, sizeof text, valid_utf8);
        bool parse_special = !check_rt && run % 3 == 0;
        int32_t *ids = NULL, n = 0;
        het_error err = { 0 };
        enum het_status st = het_tokenize(t, text, len, !check_rt && run % 2 == 0, parse_special, &ids, &n, &err);
        bool in_range = st == HET_OK;
        for (int32_t i = 0; i < n && in_range; i++) in_range = ids[i] >= 0 && ids[i] < het_tokenizer_n_vocab(t);
        CHECK(in_range, "%s random run %d: %s", name, run, st == HET_OK ? "id out of range" : err.msg);
        ok_calls += in_range;
        if (check_rt && st == HET_OK) {
            size_t dlen;
            char *d = detokenize(t, ids, n, &dlen);
            size_t skip = spm && len > 0 && dlen > 0 && d[0] == ' ';
            bool rt = d && dlen - skip == len && memcmp(d + skip, text, len) == 0;
            CHECK(rt, "%s random run %d: round trip differs (%zu bytes in, %zu out)", name, run, len, dlen);
            *rt_ok += rt;
            free(d);
        }
        free(ids);
    }
    return ok_calls;
}

/* Random bytes (malformed UTF-8 too) must always tokenize; random valid
 * UTF-8 must also round-trip where the tokenizer is lossless. (SPM is not
 * lossless on malformed input: a stray lead byte can swallow part of an
 * escaped space, which then comes back as the bytes of "▁".) */
static void test_random_inputs(const char *rel, bool round_trip)
{
    const char *path = het_test_shared(rel);
    if (!het_test_file_exists(path)) return;
    het_gguf *g = NULL;
    het_tokenizer *t = load_tokenizer(path, &g);
    if (!t) return;
    const char *name = strrchr(rel, '/') + 1;
    het_test_seed(0x70CE11 + strlen(rel));
    const int n_runs = 300;
    int rt_ok = 0, ok = random_runs(t, name, false, false, n_runs, &rt_ok);
    printf("%-34s random bytes: %d/%d ok", name, ok, n_runs);
    if (round_trip) {
        ok = random_runs(t, name, true, true, n_runs, &rt_ok);
        printf("; random UTF-8: %d/%d ok, round trip %d/%d", ok, n_runs, rt_ok, n_runs);
    }
    printf("\n");
    het_tokenizer_free(t);
    het_gguf_close(g);
}

int main(void)
{
    test_vocab_vectors();
    test_qwen3();
    test_stories();
    test_synthetic_spm();
    test_random_inputs("models/vocab/ggml-vocab-llama-spm.gguf", true);
    test_random_inputs("models/vocab/ggml-vocab-gpt-2.gguf", true);
    test_random_inputs("models/vocab/ggml-vocab-deepseek-llm.gguf", true);
    test_random_inputs("models/vocab/ggml-vocab-bert-bge.gguf", false);
    test_random_inputs("models/synthetic/vocab-qwen3.gguf", true);
    return het_test_finish();
}
