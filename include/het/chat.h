/*
 * chat.h — a chat conversation as the model's prompt text (public): the
 * template family from the GGUF, the rendering of messages, and prompt
 * tokenization as `hetrun run` does it. `hetrun chat` and the server use it.
 */
#ifndef HET_CHAT_H
#define HET_CHAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "het/status.h"
#include "het/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- chat templates --------------------------------------------------------
 * The families are recognised from the GGUF key tokenizer.chat_template (a
 * Jinja text that is not executed); anything else gets a plain transcript. */
enum het_chat_format {
    HET_CHAT_PLAIN = 0,   /* "User: ...\nAssistant:"                          */
    HET_CHAT_CHATML,      /* <|im_start|>role\n...<|im_end|>  (Qwen)          */
    HET_CHAT_LLAMA2,      /* [INST] <<SYS>>...<</SYS>> ... [/INST]            */
    HET_CHAT_LLAMA3,      /* <|start_header_id|>role<|end_header_id|>...      */
};

struct het_chat_msg {
    const char *role;     /* "system", "user", "assistant", ...              */
    const char *content;
    size_t      len;      /* bytes of content                                 */
};

enum het_chat_format het_chat_format_detect(const char *chat_template); /* NULL: plain */
const char          *het_chat_format_name(enum het_chat_format f);
/* The prompt text for msgs, ending where the assistant's reply starts.
 * Special tokens appear as their text (tokenize with parse_special); BOS is
 * not included (add it as the tokenizer says). malloc'ed; NULL when out of
 * memory or n == 0. */
char *het_chat_render(enum het_chat_format f, const struct het_chat_msg *msgs, int n, size_t *len);

/* Tokenize a prompt the way `hetrun run` does: special token texts are
 * recognised and BOS is prepended when the model adds one. */
enum het_status het_prompt_tokenize(const het_tokenizer *t, const char *text, size_t len, int32_t **ids,
                                    int32_t *n_ids, het_error *err);

#ifdef __cplusplus
}
#endif
#endif /* HET_CHAT_H */
