/*
 * test_batch.c — several sequences in one batch (continuous batching) give
 * each sequence the logits it gets when run alone: a mixed batch of two
 * prefills, then batched decode steps that include a late-joining prefill.
 */
#include "het/model.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double rel_err(const float *a, const float *b, int n)
{
    double md = 0, mb = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || d != d) md = d;
        if (fabs(b[i]) > mb) mb = fabs(b[i]);
    }
    return md / mb;
}

struct rig { het_device *cpu; het_sched *sched; het_context *ctx; };

static void rig_open(struct rig *r, het_model *m, int n_seq)
{
    het_error err = { 0 };
    r->cpu = het_cpu_device_init(0, &err);
    struct het_sched_params sp = { .devices = &r->cpu, .n_devices = 1 };
    r->sched = het_sched_init(&sp, &err);
    struct het_context_params cp = { .n_ctx = 64, .n_seq = n_seq, .sched = r->sched, .kv_f32 = true };
    r->ctx = het_context_init(m, &cp, &err);
    CHECK(r->ctx, "context: %s", err.msg);
}

static void rig_close(struct rig *r)
{
    het_context_free(r->ctx);
    het_sched_free(r->sched);
    het_device_free(r->cpu);
}

/* logits of seq alone: prompt then the decode tokens, one row per step */
static float *solo(het_model *m, const int32_t *prompt, int n_prompt, const int32_t *dec, int n_dec, int V)
{
    struct rig r;
    rig_open(&r, m, 1);
    float *out = malloc(sizeof(float) * (size_t)(n_dec + 1) * V);
    het_error err = { 0 };
    CHECK(het_context_eval(r.ctx, prompt, n_prompt, false, &err) == HET_OK, "solo: %s", err.msg);
    memcpy(out, het_context_logits(r.ctx, NULL), sizeof(float) * V);
    for (int i = 0; i < n_dec; i++) {
        CHECK(het_context_eval(r.ctx, &dec[i], 1, false, &err) == HET_OK, "solo: %s", err.msg);
        memcpy(out + (size_t)(i + 1) * V, het_context_logits(r.ctx, NULL), sizeof(float) * V);
    }
    rig_close(&r);
    return out;
}

int main(void)
{
    const char *path = het_test_source("models/stories260K.gguf");
    het_error err = { 0 };
    het_model *m = het_model_load(path, &err);
    if (!m) het_test_skip("cannot load %s: %s", path, err.msg);
    const int V = het_model_get_config(m)->n_vocab;
    const int32_t pa[] = { 1, 403, 407, 261, 378, 29, 30, 31, 40, 50 }, pb[] = { 1, 70, 80, 90, 100 };
    const int32_t pc[] = { 1, 200, 201 };
    const int32_t da[] = { 11, 12, 13, 14 }, db[] = { 21, 22, 23, 24 }, dc[] = { 31, 32 };
    float *ra = solo(m, pa, 10, da, 4, V), *rb = solo(m, pb, 5, db, 4, V), *rc = solo(m, pc, 3, dc, 2, V);

    struct rig r;
    rig_open(&r, m, 3);
    /* step 0: two prefills in one batch */
    struct het_batch_part parts[3] = { { 0, 10, pa }, { 1, 5, pb } };
    CHECK(het_context_eval_batch(r.ctx, parts, 2, false, &err) == HET_OK, "batch: %s", err.msg);
    int32_t n_out;
    const float *lg = het_context_logits(r.ctx, &n_out);
    CHECK(n_out == 2, "one row per sequence");
    CHECK(rel_err(lg, ra, V) < 1e-4 && rel_err(lg + V, rb, V) < 1e-4, "prefill rows %.2e %.2e", rel_err(lg, ra, V),
          rel_err(lg + V, rb, V));
    /* steps 1..4: decode a and b; c's prefill joins at step 2 and decodes from step 3 */
    for (int step = 0; step < 4; step++) {
        int n = 0;
        parts[n++] = (struct het_batch_part){ 1, 1, &db[step] };  /* order differs from seq order on purpose */
        parts[n++] = (struct het_batch_part){ 0, 1, &da[step] };
        if (step == 1) parts[n++] = (struct het_batch_part){ 2, 3, pc };
        if (step >= 2) parts[n++] = (struct het_batch_part){ 2, 1, &dc[step - 2] };
        CHECK(het_context_eval_batch(r.ctx, parts, n, false, &err) == HET_OK, "step %d: %s", step, err.msg);
        lg = het_context_logits(r.ctx, &n_out);
        CHECK(n_out == n, "rows");
        double eb = rel_err(lg, rb + (size_t)(step + 1) * V, V), ea = rel_err(lg + V, ra + (size_t)(step + 1) * V, V);
        CHECK(ea < 1e-4 && eb < 1e-4, "step %d: a %.2e b %.2e", step, ea, eb);
        if (n == 3) {
            double ec = rel_err(lg + 2 * V, rc + (size_t)(step - 1) * V, V);
            CHECK(ec < 1e-4, "step %d: c %.2e", step, ec);
        }
    }
    CHECK(het_context_seq_n_past(r.ctx, 0) == 14 && het_context_seq_n_past(r.ctx, 2) == 5, "positions advance");
    /* bad batches are refused without changing state */
    struct het_batch_part dup[2] = { { 0, 1, da }, { 0, 1, db } };
    CHECK(het_context_eval_batch(r.ctx, dup, 2, false, &err) == HET_ERR_INVALID, "duplicate sequence refused");
    struct het_batch_part oob = { 7, 1, da };
    CHECK(het_context_eval_batch(r.ctx, &oob, 1, false, &err) == HET_ERR_INVALID, "bad sequence refused");
    CHECK(het_context_seq_n_past(r.ctx, 0) == 14, "state unchanged after refusals");
    het_context_seq_reset(r.ctx, 1);
    CHECK(het_context_seq_n_past(r.ctx, 1) == 0 && het_context_seq_n_past(r.ctx, 0) == 14, "reset one sequence");
    rig_close(&r);

    /* a wide batch: 32 sequences of one token each fit the graph arena */
    rig_open(&r, m, 32);
    struct het_batch_part wide[32];
    int32_t tok[32];
    for (int s = 0; s < 32; s++) {
        tok[s] = 100 + s;
        wide[s] = (struct het_batch_part){ s, 1, &tok[s] };
    }
    CHECK(het_context_eval_batch(r.ctx, wide, 32, false, &err) == HET_OK, "32 sequences: %s", err.msg);
    het_context_logits(r.ctx, &n_out);
    CHECK(n_out == 32, "32 rows, got %d", n_out);
    rig_close(&r);
    free(ra); free(rb); free(rc);
    het_model_free(m);
    return het_test_finish();
}
