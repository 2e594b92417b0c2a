/*
 * llama_greedy.c — greedy decoding with llama.cpp, for the comparisons in
 * bench/moe_gguf_py.sh (built there against a llama.cpp tree; not part of
 * het's build). It tokenises the prompt as llama.cpp does (special tokens
 * added per the file), evaluates it, then picks the argmax of the logits n
 * times, and prints one line per token:
 *     P <id>                      a prompt token
 *     G <id> <margin> <piece>     a generated token, the gap between its
 *                                 logit and the runner-up's, its text
 *                                 (hex-encoded bytes)
 *   usage: llama_greedy MODEL N_PREDICT THREADS PROMPT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL N_PREDICT THREADS PROMPT\n", argv[0]);
        return 2;
    }
    const int n_predict = atoi(argv[2]), n_threads = atoi(argv[3]);
    const char *prompt = argv[4];
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "llama_greedy: cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int n_prompt = -llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), NULL, 0, true, false);
    llama_token *toks = malloc(sizeof *toks * (size_t)(n_prompt + n_predict + 1));
    if (!toks || n_prompt <= 0 ||
        llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), toks, n_prompt, true, false) != n_prompt) {
        fprintf(stderr, "llama_greedy: cannot tokenise the prompt\n");
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_predict + 16);
    cp.n_batch = (uint32_t)(n_prompt > 32 ? n_prompt : 32);
    cp.n_threads = cp.n_threads_batch = n_threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_greedy: cannot create a context\n");
        return 1;
    }
    for (int i = 0; i < n_prompt; i++) printf("P %d\n", toks[i]);
    struct llama_batch batch = llama_batch_get_one(toks, n_prompt);
    for (int g = 0; g < n_predict; g++) {
        if (llama_decode(ctx, batch)) {
            fprintf(stderr, "llama_greedy: decode failed\n");
            return 1;
        }
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0, second = -1;
        for (int v = 1; v < n_vocab; v++) {
            if (lg[v] > lg[best]) {
                second = best;
                best = v;
            } else if (second < 0 || lg[v] > lg[second]) {
                second = v;
            }
        }
        char piece[256];
        const int n = llama_token_to_piece(vocab, best, piece, sizeof piece, 0, true);
        printf("G %d %.6f ", best, (double)(lg[best] - lg[second]));
        for (int i = 0; i < n; i++) printf("%02x", (unsigned char)piece[i]);
        printf("\n");
        toks[n_prompt + g] = best;
        batch = llama_batch_get_one(&toks[n_prompt + g], 1);
    }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(toks);
    return 0;
}
