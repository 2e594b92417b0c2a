/*
 * cmd_tokenize.c — `hetrun tokenize`: print a text's token ids on one line.
 * Only the tokenizer is loaded, so vocab-only GGUF files work too.
 */
#include "tools/hetrun.h"

#include "het/gguf.h"
#include "het/tokenizer.h"

#include <stdlib.h>

int cmd_tokenize(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "tokenize", "-m -p -f --no-bos", argc, argv)) return 2;
    het_error err = { 0 };
    het_gguf *g = het_gguf_open(o.model, &err);
    if (!g) {
        hr_error(&o, "%s", err.msg);
        return 1;
    }
    het_tokenizer *tok = het_tokenizer_from_gguf(g, &err);
    if (!tok) {
        hr_error(&o, "%s: %s", o.model, err.msg);
        het_gguf_close(g);
        return 1;
    }
    size_t len;
    char *owned;
    const char *text = hr_prompt_text(&o, &len, &owned);
    if (!text) goto fail;
    int32_t *ids = NULL, n = 0;
    if (het_tokenize(tok, text, len, !o.no_bos, true, &ids, &n, &err) != HET_OK) {
        hr_error(&o, "%s", err.msg);
        goto fail;
    }
    for (int32_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    free(ids);
    free(owned);
    het_tokenizer_free(tok);
    het_gguf_close(g);
    return 0;
fail:
    free(owned);
    het_tokenizer_free(tok);
    het_gguf_close(g);
    return 1;
}
