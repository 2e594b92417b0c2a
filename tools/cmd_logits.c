/*
 * cmd_logits.c — `hetrun logits`: evaluate a prompt and write the logits of
 * every position (format in docs/logits-format.md):
 *   int32 n_tokens, int32 n_vocab, int32 ids[n_tokens],
 *   float32 logits[n_tokens][n_vocab], all little-endian.
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>

#define LOGITS_FLAGS "-m -p -f -o -t -c --no-bos --stats -v " HR_PLACEMENT_FLAGS

static bool write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n; }

int cmd_logits(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "logits", LOGITS_FLAGS, argc, argv)) return 2;
    if (!o.out) {
        hr_error(&o, "-o OUT is required");
        return 2;
    }
    if (!o.prompt && !o.prompt_file) {
        hr_error(&o, "-p PROMPT or -f FILE is required");
        return 2;
    }
    struct hr_session s;
    int rc = 1;
    int32_t *ids = NULL, n_ids = 0;
    FILE *f = NULL;
    if (!hr_session_open(&s, &o, true) || !hr_tokenize_prompt(&s, &o, &ids, &n_ids)) goto done;
    if (n_ids == 0) {
        hr_error(&o, "the prompt has no tokens");
        goto done;
    }
    het_error err = { 0 };
    if (het_context_eval(s.ctx, ids, n_ids, true, &err) != HET_OK) {
        hr_error(&o, "%s", err.msg);
        goto done;
    }
    int32_t n_out = 0;
    const float *logits = het_context_logits(s.ctx, &n_out);
    int32_t n_vocab = het_model_get_config(s.model)->n_vocab;
    f = fopen(o.out, "wb");
    if (!f) {
        hr_error(&o, "-o %s: cannot open for writing", o.out);
        goto done;
    }
    /* x86 and the formats' byte order agree (little-endian) */
    if (!write_all(f, &n_ids, 4) || !write_all(f, &n_vocab, 4) || !write_all(f, ids, (size_t)n_ids * 4) ||
        !write_all(f, logits, (size_t)n_out * n_vocab * sizeof(float))) {
        hr_error(&o, "-o %s: write failed", o.out);
        goto done;
    }
    if (fclose(f) != 0) {
        f = NULL;
        hr_error(&o, "-o %s: write failed", o.out);
        goto done;
    }
    f = NULL;
    fprintf(stderr, "wrote %d x %d logits to %s\n", n_out, n_vocab, o.out);
    hr_print_stats(&s, &o);
    rc = 0;
done:
    if (f) {
        fclose(f);
        remove(o.out);
    }
    free(ids);
    hr_session_close(&s);
    return rc;
}
