/*
 * cmd_run.c — `hetrun run`: generate text from a prompt, streaming it to
 * stdout; timings go to stderr so stdout stays the text alone.
 */
#include "tools/gpu_times.h"
#include "tools/hetrun.h"

#include <stdlib.h>

#define RUN_FLAGS "-m -p -f -n --temp --top-k --top-p --seed -t -c --no-bos --stats -v --long-model --long-threshold " \
                  "--long-devices --long-ctx --gpu-times --repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty " \
                  "--min-p --logit-bias " HR_PLACEMENT_FLAGS

static void put_piece(const het_tokenizer *tok, int32_t id)
{
    char buf[256];
    int n = het_token_to_piece(tok, id, buf, sizeof buf, false);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
    fflush(stdout);
}

/* --logit-bias "TOKEN=BIAS[,TOKEN=BIAS...]" into *out (malloc'ed) */
static bool parse_logit_bias(const struct hr_opts *o, int32_t n_vocab, struct het_logit_bias **out, int32_t *n)
{
    *out = NULL;
    *n = 0;
    if (!o->logit_bias) return true;
    size_t cap = 1;
    for (const char *p = o->logit_bias; *p; p++) cap += *p == ',';
    *out = calloc(cap, sizeof **out);
    if (!*out) return false;
    const char *p = o->logit_bias;
    for (;;) {
        char *end;
        long tok = strtol(p, &end, 10);
        bool ok = end != p && *end == '=' && tok >= 0 && tok < n_vocab;
        double bias = ok ? strtod(end + 1, &end) : 0;
        ok = ok && (*end == ',' || !*end) && bias >= -100 && bias <= 100;
        if (!ok) {
            hr_error(o, "--logit-bias: '%s' is not TOKEN=BIAS[,...] with TOKEN in [0, %d] and BIAS in [-100, 100]",
                     o->logit_bias, n_vocab - 1);
            return false;
        }
        (*out)[(*n)++] = (struct het_logit_bias){ (int32_t)tok, (float)bias };
        if (!*end) return true;
        p = end + 1;
    }
}

int cmd_run(int argc, char **argv)
{
    struct hr_opts o;
    if (!hr_parse(&o, "run", RUN_FLAGS, argc, argv)) return 2;
    if (o.n_predict < 0) o.n_predict = 128;
    if (!o.prompt && !o.prompt_file) o.prompt = "Once upon a time";
    struct hr_session s;
    struct hr_gpu_times gt = { 0 };
    int rc = 1;
    int32_t *ids = NULL, n_ids = 0;
    het_sampler *smp = NULL;
    struct het_logit_bias *bias = NULL;
    int32_t n_bias = 0;
    if (!hr_session_open(&s, &o, true) || !hr_tokenize_prompt(&s, &o, &ids, &n_ids)) goto done;
    if (o.long_model && !hr_route_session(&s, &o, &ids, &n_ids)) goto done;
    if (n_ids == 0) {
        hr_error(&o, "the prompt is empty and the model adds no BOS token");
        goto done;
    }
    if (n_ids + o.n_predict > het_context_n_ctx(s.ctx) && n_ids >= het_context_n_ctx(s.ctx)) {
        hr_error(&o, "prompt of %d tokens does not fit the context of %d (use -c)", n_ids, het_context_n_ctx(s.ctx));
        goto done;
    }
    hr_gpu_times_begin(&gt, &s, &o);
    const het_tokenizer *tok = het_model_tokenizer(s.model);
    const struct het_model_config *cfg = het_model_get_config(s.model);
    if (!parse_logit_bias(&o, cfg->n_vocab, &bias, &n_bias)) {
        rc = 2; /* a usage error, found once the vocabulary is known */
        goto done;
    }
    bool pen = o.repeat_last_n != 0; /* as llama.cpp: --repeat-last-n 0 turns the penalties off */
    struct het_sampler_params sp = {
        .temp = o.temp, .top_k = o.top_k, .top_p = o.top_p, .seed = o.seed, .min_p = o.min_p,
        .repeat_penalty = pen ? o.repeat_penalty : 1.0f, .presence_penalty = pen ? o.presence_penalty : 0,
        .frequency_penalty = pen ? o.frequency_penalty : 0, .penalty_last_n = o.repeat_last_n,
        .logit_bias = bias, .n_logit_bias = n_bias,
    };
    smp = het_sampler_init(&sp, cfg->n_vocab);
    if (!smp) goto done;
    for (int32_t i = 0; i < n_ids; i++) het_sampler_accept(smp, ids[i], false);

    if (o.prompt) fputs(o.prompt, stdout);
    fflush(stdout);
    het_error err = { 0 };
    double t0 = hr_now_ms();
    if (het_context_eval(s.ctx, ids, n_ids, false, &err) != HET_OK) {
        hr_error(&o, "%s", err.msg);
        goto done;
    }
    double t_prefill = hr_now_ms() - t0;
    struct het_sched_stats st0;
    het_sched_get_stats(s.sched, &st0);
    hr_gpu_times_take(&gt, "prefill");
    int n_gen = 0;
    double t1 = hr_now_ms();
    for (; n_gen < o.n_predict; n_gen++) {
        int32_t id = het_sampler_sample(smp, het_context_logits(s.ctx, NULL));
        if (het_tokenizer_is_eog(tok, id)) break;
        het_sampler_accept(smp, id, true);
        put_piece(tok, id);
        if (n_gen + 1 == o.n_predict) { n_gen++; break; }
        if (het_context_n_past(s.ctx) >= het_context_n_ctx(s.ctx)) {
            fprintf(stderr, "\nhetrun run: context full (%d tokens)\n", het_context_n_ctx(s.ctx));
            n_gen++;
            break;
        }
        if (het_context_eval(s.ctx, &id, 1, false, &err) != HET_OK) {
            hr_error(&o, "%s", err.msg);
            goto done;
        }
    }
    double t_decode = hr_now_ms() - t1;
    hr_gpu_times_take(&gt, "decode");
    printf("\n");
    fflush(stdout); /* before the stderr line: piped, stdout is fully buffered */
    fprintf(stderr, "prefill: %d tokens in %.1f ms (%.1f tok/s); decode: %d tokens in %.1f ms (%.1f tok/s)\n", n_ids,
            t_prefill, n_ids * 1000.0 / t_prefill, n_gen, t_decode, n_gen > 1 ? (n_gen - 1) * 1000.0 / t_decode : 0.0);
    struct het_sched_stats st1;
    het_sched_get_stats(s.sched, &st1);
    if (st1.probe_us > 0) /* online correction's share of those times, said rather than hidden */
        fprintf(stderr, "of which timing nodes for the cost model: %.1f ms in prefill, %.1f ms in decode\n",
                st0.probe_us / 1e3, (st1.probe_us - st0.probe_us) / 1e3);
    hr_print_stats(&s, &o);
    rc = 0;
done:
    hr_gpu_times_end(&gt);
    het_sampler_free(smp);
    free(bias);
    free(ids);
    hr_session_close(&s);
    return rc;
}
