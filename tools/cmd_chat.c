/*
 * cmd_chat.c — `hetrun chat`: a conversation with the model through its
 * chat template (het/chat.h). On a terminal a "> " prompt goes to stderr
 * and each reply streams to stdout; "/exit" or end of input ends it. When
 * stdin is not a terminal every input line is one user turn and each reply
 * is printed on one line of its own, so a conversation can be scripted.
 *
 * The KV cache keeps the conversation: each turn renders the whole
 * conversation, and only the tokens after the longest prefix it shares with
 * what the cache holds are evaluated.
 */
#include "tools/hetrun.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "het/chat.h"

#define CHAT_FLAGS "-m -n --system --temp --top-k --top-p --seed -t -c -v --stats " HR_PLACEMENT_FLAGS
#define REPLY_TOKENS 512 /* -n when not given */

struct chat {
    struct hr_opts       o;
    struct hr_session    s;
    enum het_chat_format fmt;
    struct het_chat_msg *msgs;      /* contents owned (malloc'ed)              */
    int                  n_msgs;
    int32_t             *cached;    /* the tokens the KV cache holds, in order */
    int32_t              n_cached;
    het_sampler         *smp;
    const char          *stop;      /* text that ends a reply ("" none)         */
};

static bool add_msg(struct chat *c, const char *role, const char *text, size_t len)
{
    struct het_chat_msg *m = realloc(c->msgs, (size_t)(c->n_msgs + 1) * sizeof *m);
    char *copy = malloc(len + 1);
    if (m) c->msgs = m;
    if (!m || !copy) {
        free(copy);
        hr_error(&c->o, "out of memory");
        return false;
    }
    memcpy(copy, text, len);
    copy[len] = 0;
    c->msgs[c->n_msgs++] = (struct het_chat_msg){ .role = role, .content = copy, .len = len };
    return true;
}

/* Evaluate the rendered conversation: truncate the cache to the prefix it
 * shares with ids (at least one token is evaluated, for the logits). */
static bool eval_prompt(struct chat *c, const int32_t *ids, int32_t n)
{
    het_context *ctx = c->s.ctx;
    if (n >= het_context_n_ctx(ctx)) {
        hr_error(&c->o, "the conversation (%d tokens) does not fit the context of %d (use -c)", n,
                 het_context_n_ctx(ctx));
        return false;
    }
    int32_t p = 0;
    while (p < c->n_cached && p < n - 1 && c->cached[p] == ids[p]) p++;
    het_error err = { 0 };
    het_context_seq_keep(ctx, 0, p);
    if (het_context_eval(ctx, ids + p, n - p, false, &err) != HET_OK) {
        hr_error(&c->o, "%s", err.msg);
        return false;
    }
    int32_t *nc = realloc(c->cached, (size_t)het_context_n_ctx(ctx) * sizeof *nc);
    if (!nc) return false;
    c->cached = nc;
    memcpy(c->cached, ids, (size_t)n * sizeof *ids);
    c->n_cached = n;
    return true;
}

/* Print what of reply[*shown..len) cannot be the start of the stop text. */
static void show(const struct chat *c, const char *reply, size_t len, size_t *shown, bool final)
{
    size_t keep = 0, ns = strlen(c->stop);
    for (size_t k = ns ? ns - 1 : 0; !final && k > 0; k--)
        if (len >= *shown + k && !memcmp(reply + len - k, c->stop, k)) {
            keep = k;
            break;
        }
    fwrite(reply + *shown, 1, len - keep - *shown, stdout);
    fflush(stdout);
    *shown = len - keep;
}

/* Generate one reply into *out (malloc'ed), streaming it to stdout. */
static bool reply(struct chat *c, char **out, size_t *out_len)
{
    het_context *ctx = c->s.ctx;
    const het_tokenizer *tok = het_model_tokenizer(c->s.model);
    size_t len = 0, cap = 256, shown = 0;
    char *text = malloc(cap);
    het_error err = { 0 };
    bool ok = text != NULL;
    for (int i = 0; ok && i < c->o.n_predict; i++) {
        int32_t id = het_sampler_sample(c->smp, het_context_logits(ctx, NULL));
        if (het_tokenizer_is_eog(tok, id)) break;
        char piece[256];
        int n = het_token_to_piece(tok, id, piece, sizeof piece, false);
        if (n > 0) {
            if (len + (size_t)n + 1 > cap) {
                char *nt = realloc(text, cap = 2 * (len + (size_t)n + 1));
                if (!nt) { ok = false; break; }
                text = nt;
            }
            memcpy(text + len, piece, (size_t)n);
            len += (size_t)n;
            text[len] = 0;
            char *at = *c->stop ? strstr(text, c->stop) : NULL;
            if (at) {
                len = (size_t)(at - text);
                break;
            }
            show(c, text, len, &shown, false);
        }
        if (i + 1 == c->o.n_predict) break;
        if (het_context_n_past(ctx) >= het_context_n_ctx(ctx)) {
            fprintf(stderr, "\nhetrun chat: context full (%d tokens)\n", het_context_n_ctx(ctx));
            break;
        }
        if (het_context_eval(ctx, &id, 1, false, &err) != HET_OK) {
            hr_error(&c->o, "%s", err.msg);
            ok = false;
            break;
        }
        c->cached[c->n_cached++] = id;
    }
    if (!ok) {
        free(text);
        return false;
    }
    text[len] = 0;
    show(c, text, len, &shown, true);
    fputc('\n', stdout);
    fflush(stdout);
    *out = text;
    *out_len = len;
    return true;
}

/* One user turn: render, evaluate, reply, keep the reply (trimmed) in the conversation. */
static bool turn(struct chat *c, const char *line, size_t len)
{
    if (!add_msg(c, "user", line, len)) return false;
    size_t plen = 0;
    char *prompt = het_chat_render(c->fmt, c->msgs, c->n_msgs, &plen);
    int32_t *ids = NULL, n = 0;
    het_error err = { 0 };
    bool ok = prompt && het_prompt_tokenize(het_model_tokenizer(c->s.model), prompt, plen, &ids, &n, &err) == HET_OK;
    if (!ok) hr_error(&c->o, "%s", prompt ? err.msg : "out of memory");
    free(prompt);
    char *text = NULL;
    size_t tlen = 0;
    ok = ok && eval_prompt(c, ids, n) && reply(c, &text, &tlen);
    free(ids);
    if (!ok) return false;
    size_t a = 0;
    while (a < tlen && (text[a] == ' ' || text[a] == '\n')) a++;
    while (tlen > a && (text[tlen - 1] == ' ' || text[tlen - 1] == '\n')) tlen--;
    ok = add_msg(c, "assistant", text + a, tlen - a);
    free(text);
    return ok;
}

int cmd_chat(int argc, char **argv)
{
    struct chat *c = calloc(1, sizeof *c);
    if (!c) return 1;
    int rc = 1;
    char *line = NULL;
    size_t cap = 0;
    if (!hr_parse(&c->o, "chat", CHAT_FLAGS, argc, argv)) {
        rc = 2;
        goto done;
    }
    if (c->o.n_predict < 0) c->o.n_predict = REPLY_TOKENS;
    if (!hr_session_open(&c->s, &c->o, true)) goto done;
    const struct het_model_config *cfg = het_model_get_config(c->s.model);
    c->fmt = het_chat_format_detect(het_gguf_get_str(het_model_gguf(c->s.model), "tokenizer.chat_template"));
    c->stop = c->fmt == HET_CHAT_PLAIN ? "\nUser:" : ""; /* a transcript has no end-of-turn token */
    struct het_sampler_params sp = { .temp = c->o.temp, .top_k = c->o.top_k, .top_p = c->o.top_p, .seed = c->o.seed };
    c->smp = het_sampler_init(&sp, cfg->n_vocab);
    c->cached = malloc((size_t)het_context_n_ctx(c->s.ctx) * sizeof *c->cached);
    if (!c->smp || !c->cached) goto done;
    if (c->o.system && !add_msg(c, "system", c->o.system, strlen(c->o.system))) goto done;
    const bool tty = isatty(0);
    if (tty)
        fprintf(stderr, "hetrun chat: %s (template %s); /exit or Ctrl-D ends\n", c->o.model, het_chat_format_name(c->fmt));
    for (;;) {
        if (tty) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) break;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!strcmp(line, "/exit")) break;
        if (n == 0) continue;
        if (!turn(c, line, (size_t)n)) goto done;
    }
    if (tty) fputc('\n', stderr);
    hr_print_stats(&c->s, &c->o);
    rc = 0;
done:
    free(line);
    for (int i = 0; i < c->n_msgs; i++) free((void *)c->msgs[i].content);
    free(c->msgs);
    free(c->cached);
    het_sampler_free(c->smp);
    hr_session_close(&c->s);
    free(c);
    return rc;
}
