/*
 * generate.c — the smallest use of libhet: load a model, evaluate a prompt
 * and print the greedy continuation.
 *   cc generate.c $(pkg-config --cflags --libs het) -o generate
 *   ./generate MODEL PROMPT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "het/chat.h"
#include "het/session.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: generate MODEL PROMPT\n");
        return 2;
    }
    het_error err = { 0 };
    struct het_session_params p = { .model_path = argv[1], .open_context = true };
    het_session *s = het_session_open(&p, &err);
    if (!s) {
        fprintf(stderr, "generate: %s\n", err.msg);
        return 1;
    }
    het_model *m = het_session_model(s);
    het_context *ctx = het_session_context(s);
    const het_tokenizer *tok = het_model_tokenizer(m);
    int32_t *ids = NULL, n = 0, n_vocab = het_model_get_config(m)->n_vocab;
    int rc = 1;
    if (het_prompt_tokenize(tok, argv[2], strlen(argv[2]), &ids, &n, &err) != HET_OK ||
        het_context_eval(ctx, ids, n, false, &err) != HET_OK)
        goto done;
    fputs(argv[2], stdout);
    for (int i = 0; i < 128 && het_context_n_past(ctx) < het_context_n_ctx(ctx); i++) {
        int32_t id = het_argmax(het_context_logits(ctx, NULL), n_vocab);
        if (het_tokenizer_is_eog(tok, id)) break;
        char piece[256];
        int len = het_token_to_piece(tok, id, piece, sizeof piece, false);
        if (len > 0) fwrite(piece, 1, (size_t)len, stdout);
        if (het_context_eval(ctx, &id, 1, false, &err) != HET_OK) goto done;
    }
    putchar('\n');
    rc = 0;
done:
    if (rc) fprintf(stderr, "generate: %s\n", err.msg);
    free(ids);
    het_session_close(s);
    return rc;
}
