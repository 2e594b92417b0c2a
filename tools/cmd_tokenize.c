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
    const char *text = o.prompt ? o.prompt : "";
    size_t len = 0;
    char *owned = NULL;
    if (o.prompt_file) {
        FILE *f = fopen(o.prompt_file, "rb");
        if (!f) {
            hr_error(&o, "-f %s: cannot read the file", o.prompt_file);
            goto fail;
        }
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        owned = malloc(sz > 0 ? (size_t)sz : 1);
        len = owned ? fread(owned, 1, (size_t)(sz > 0 ? sz : 0), f) : 0;
        fclose(f);
        text = owned;
    } else {
        for (const char *p = text; *p; p++) len++;
    }
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
