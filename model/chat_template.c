/*
 * chat_template.c — turning chat messages into one prompt text for the
 * template families we recognise (ChatML/Qwen, Llama-2, Llama-3), with a
 * plain transcript for models without a template, and tokenizing prompts
 * the way `hetrun run` does so both give the same tokens (het/chat.h; used
 * by `hetrun chat` and the server).
 *
 * The GGUF's tokenizer.chat_template is Jinja; rather than run it we look
 * for each family's marker tokens, which is what the templates in the wild
 * differ by.
 */
#include "het/chat.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growable text; an allocation failure sets oom and later appends do nothing. */
struct text {
    char  *p;
    size_t len, cap;
    bool   oom;
};

static void text_append(struct text *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void text_puts(struct text *b, const char *s) { text_append(b, s, strlen(s)); }

static void text_printf(struct text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void text_printf(struct text *b, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof buf) n = (int)sizeof buf - 1; /* roles are short */
    if (n > 0) text_append(b, buf, (size_t)n);
}

enum het_chat_format het_chat_format_detect(const char *tmpl)
{
    if (!tmpl) return HET_CHAT_PLAIN;
    if (strstr(tmpl, "<|im_start|>")) return HET_CHAT_CHATML;
    if (strstr(tmpl, "<|start_header_id|>")) return HET_CHAT_LLAMA3;
    if (strstr(tmpl, "[INST]")) return HET_CHAT_LLAMA2;
    return HET_CHAT_PLAIN;
}

const char *het_chat_format_name(enum het_chat_format f)
{
    switch (f) {
    case HET_CHAT_CHATML: return "chatml";
    case HET_CHAT_LLAMA2: return "llama2";
    case HET_CHAT_LLAMA3: return "llama3";
    case HET_CHAT_PLAIN:  break;
    }
    return "plain";
}

static void put_content(struct text *b, const struct het_chat_msg *m)
{
    text_append(b, m->content, m->len);
}

static void render_chatml(struct text *b, const struct het_chat_msg *msgs, int n)
{
    for (int i = 0; i < n; i++) {
        text_printf(b, "<|im_start|>%s\n", msgs[i].role);
        put_content(b, &msgs[i]);
        text_puts(b, "<|im_end|>\n");
    }
    text_puts(b, "<|im_start|>assistant\n");
}

static void render_llama3(struct text *b, const struct het_chat_msg *msgs, int n)
{
    for (int i = 0; i < n; i++) {
        text_printf(b, "<|start_header_id|>%s<|end_header_id|>\n\n", msgs[i].role);
        put_content(b, &msgs[i]);
        text_puts(b, "<|eot_id|>");
    }
    text_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama-2: the system message is folded into the first user turn; each
 * finished exchange is closed with </s> and the next opened with <s>. */
static void render_llama2(struct text *b, const struct het_chat_msg *msgs, int n)
{
    const struct het_chat_msg *sys = NULL;
    bool open = false; /* inside [INST] ... awaiting [/INST] */
    for (int i = 0; i < n; i++) {
        const struct het_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "system")) {
            sys = m;
        } else if (!strcmp(m->role, "assistant")) {
            if (open) text_puts(b, " [/INST]");
            text_puts(b, " ");
            put_content(b, m);
            text_puts(b, " </s><s>");
            open = false;
        } else {
            if (open) text_puts(b, " [/INST]");
            text_puts(b, "[INST] ");
            if (sys) {
                text_puts(b, "<<SYS>>\n");
                put_content(b, sys);
                text_puts(b, "\n<</SYS>>\n\n");
                sys = NULL;
            }
            put_content(b, m);
            open = true;
        }
    }
    if (sys) { /* only a system message: treat it as the instruction */
        text_puts(b, "[INST] ");
        put_content(b, sys);
        open = true;
    }
    if (open) text_puts(b, " [/INST]");
}

static void render_plain(struct text *b, const struct het_chat_msg *msgs, int n)
{
    for (int i = 0; i < n; i++) {
        const struct het_chat_msg *m = &msgs[i];
        if (!strcmp(m->role, "system")) {
            put_content(b, m);
            text_puts(b, "\n\n");
            continue;
        }
        text_puts(b, !strcmp(m->role, "assistant") ? "Assistant: " : "User: ");
        put_content(b, m);
        text_puts(b, "\n");
    }
    text_puts(b, "Assistant:");
}

char *het_chat_render(enum het_chat_format f, const struct het_chat_msg *msgs, int n, size_t *len)
{
    if (n <= 0) return NULL;
    struct text b = { 0 };
    switch (f) {
    case HET_CHAT_CHATML: render_chatml(&b, msgs, n); break;
    case HET_CHAT_LLAMA2: render_llama2(&b, msgs, n); break;
    case HET_CHAT_LLAMA3: render_llama3(&b, msgs, n); break;
    case HET_CHAT_PLAIN:  render_plain(&b, msgs, n); break;
    }
    if (b.oom || !b.p) {
        free(b.p);
        return NULL;
    }
    if (len) *len = b.len;
    return b.p;
}

enum het_status het_prompt_tokenize(const het_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                    int32_t *n_ids, het_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    enum het_status st = het_tokenize(t, text, len, false, true, ids, n_ids, err);
    if (st != HET_OK) return st;
    if (!het_tokenizer_add_bos(t) || het_tokenizer_bos(t) < 0) return HET_OK;
    int32_t *nb = realloc(*ids, (size_t)(*n_ids + 1) * sizeof *nb);
    if (!nb) {
        free(*ids);
        *ids = NULL;
        *n_ids = 0;
        return het_error_set(err, HET_ERR_NOMEM, "tokenize: out of memory");
    }
    memmove(nb + 1, nb, (size_t)*n_ids * sizeof *nb);
    nb[0] = het_tokenizer_bos(t);
    *ids = nb;
    (*n_ids)++;
    return HET_OK;
}
