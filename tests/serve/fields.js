// fields.js — the request fields beyond the basics, through the official
// openai client (see test_serve_e2e.sh): logprobs in both endpoints' shapes,
// streamed and not; penalties, logit_bias, min_p, seed and
// max_completion_tokens each changing the output as they must; JSON mode;
// refused fields as typed errors naming the field.
'use strict';
const OpenAI = require('openai');

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.env.PORT}/v1`, apiKey: 'none', maxRetries: 0 });
const model = 'stories260K';
const prompt = 'Once upon a time';
const messages = [{ role: 'user', content: 'Tell me about a cat.' }];
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}
const text = (r) => r.choices[0].text;
const greedy = (extra) => client.completions.create(Object.assign({ model, prompt, max_tokens: 24, temperature: 0 }, extra));

async function main() {
    // chat logprobs: one entry per generated token, greedy = the most likely
    const c = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, logprobs: true, top_logprobs: 3 });
    const lp = c.choices[0].logprobs && c.choices[0].logprobs.content;
    check(Array.isArray(lp) && lp.length === c.usage.completion_tokens, `chat logprobs: ${JSON.stringify(c.choices[0].logprobs).slice(0, 200)}`);
    if (Array.isArray(lp)) {
        check(lp.map((t) => t.token).join('') === c.choices[0].message.content, 'chat logprob tokens make the content');
        check(lp.every((t) => t.logprob <= 0 && t.top_logprobs.length === 3 && t.top_logprobs[0].token === t.token &&
                               Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6 && Array.isArray(t.bytes)), 'chat top_logprobs');
    }
    // streamed: the chunks' logprobs add up to the same tokens
    const cs = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, logprobs: true, stream: true });
    let streamedTokens = [], streamedText = '';
    for await (const ch of cs) {
        if (!ch.choices.length) continue;
        streamedText += ch.choices[0].delta.content || '';
        if (ch.choices[0].logprobs) streamedTokens.push(...ch.choices[0].logprobs.content.map((t) => t.token));
    }
    check(streamedText === c.choices[0].message.content && streamedTokens.join('') === streamedText,
          `streamed logprobs: ${JSON.stringify(streamedTokens)} vs ${JSON.stringify(streamedText)}`);
    // completions logprobs: the legacy shape
    const base = await greedy({});
    const cl = await greedy({ logprobs: 2 });
    const L = cl.choices[0].logprobs;
    check(L && L.tokens.join('') === text(cl) && L.token_logprobs.length === L.tokens.length &&
          L.top_logprobs.length === L.tokens.length && L.text_offset[0] === 0 &&
          L.text_offset.every((o, i) => i === 0 || o === L.text_offset[i - 1] + Buffer.byteLength(L.tokens[i - 1])),
          `completion logprobs ${JSON.stringify(L).slice(0, 300)}`);
    check(text(cl) === text(base), 'logprobs do not change the text');

    // each sampling field changes greedy output the way it should
    const long = await greedy({ max_tokens: 40 });
    for (const [field, value] of [['repeat_penalty', 1.8], ['presence_penalty', 2], ['frequency_penalty', 2]]) {
        const r = await greedy({ [field]: value, max_tokens: 40 });
        check(text(r) !== text(long) && text(r).length > 0, `${field} ${value} changes the text: ${JSON.stringify(text(r))}`);
    }
    const off = await greedy({ repeat_penalty: 1.8, repeat_last_n: 0, max_tokens: 40 });
    check(text(off) === text(long), 'repeat_last_n 0 turns the penalty off');
    // logit_bias +100 on one token: greedy emits only it
    const forced = await greedy({ logit_bias: { 400: 100 }, logprobs: 0, max_tokens: 6 });
    const ft = forced.choices[0].logprobs.tokens;
    check(ft.length === 6 && ft.every((t) => t === ft[0]), `logit_bias forces token 400: ${JSON.stringify(ft)}`);
    // min_p 1 keeps only the most likely token: sampling becomes greedy
    const mp = await greedy({ temperature: 1, min_p: 1, seed: 3 });
    check(text(mp) === text(base), `min_p 1 = greedy: ${JSON.stringify(text(mp))}`);
    // seed: the same seed gives the same text, others differ
    const s1 = await greedy({ temperature: 1, seed: 11 }), s2 = await greedy({ temperature: 1, seed: 11 });
    const others = await Promise.all([12, 13, 14].map((seed) => greedy({ temperature: 1, seed })));
    check(text(s1) === text(s2) && others.some((o) => text(o) !== text(s1)), 'seed honoured per request');
    const mc = await client.chat.completions.create({ model, messages, max_completion_tokens: 5, temperature: 0, ignore_eos: true });
    check(mc.usage.completion_tokens === 5 && mc.choices[0].finish_reason === 'length', `max_completion_tokens ${JSON.stringify(mc.usage)}`);

    // n choices: each with its own index and seed, the same streamed or not
    const nc = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 1, seed: 5, n: 3,
                                                      ignore_eos: true });
    check(nc.choices.length === 3 && nc.choices.every((c, i) => c.index === i && c.finish_reason === 'length') &&
          nc.usage.completion_tokens === 30 && new Set(nc.choices.map((c) => c.message.content)).size > 1,
          `n 3: ${JSON.stringify(nc.choices.map((c) => [c.index, c.message.content]))} ${JSON.stringify(nc.usage)}`);
    const ns = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 1, seed: 5, n: 3,
                                                      ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    const got = ['', '', ''], fins = [null, null, null];
    let nUsage = null;
    for await (const ch of ns) {
        if (ch.usage) nUsage = ch.usage;
        for (const c of ch.choices) {
            got[c.index] += c.delta.content || '';
            if (c.finish_reason) fins[c.index] = c.finish_reason;
        }
    }
    check(got.every((t, i) => t === nc.choices[i].message.content) && fins.every((f) => f === 'length') &&
          nUsage && nUsage.completion_tokens === 30, `n 3 streamed: ${JSON.stringify(got)} ${fins} ${JSON.stringify(nUsage)}`);
    const n1 = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 1, seed: 5, ignore_eos: true });
    check(n1.choices[0].message.content === nc.choices[0].message.content, 'choice 0 of n = the answer with n 1');

    // JSON mode: the reply starts an object; when it ends, it parses
    let parsed = 0;
    for (const seed of [1, 2, 3, 4]) {
        const j = await client.chat.completions.create({ model, messages, max_tokens: 60, temperature: 1, seed,
                                                         response_format: { type: 'json_object' } });
        const s = j.choices[0].message.content;
        check(s.trimStart().startsWith('{'), `json_object: ${JSON.stringify(s)}`);
        if (j.choices[0].finish_reason === 'stop') {
            try { check(typeof JSON.parse(s) === 'object', 'an object'); parsed++; } catch (e) { check(false, `not JSON: ${s}`); }
        }
    }
    console.log(`json_object: ${parsed} of 4 replies complete within 60 tokens`);

    // refused: typed errors naming the field
    const refused = [
        [{ n: 17 }, 'n'], [{ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }, 'tools'],
        [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: {} } } }, 'response_format.type'],
        [{ mirostat: 2 }, 'mirostat'],
    ];
    for (const [extra, param] of refused) {
        try {
            await client.chat.completions.create(Object.assign({ model, messages, max_tokens: 4 }, extra));
            check(false, `${param} accepted`);
        } catch (e) {
            check(e instanceof OpenAI.BadRequestError && e.param === param && /./.test(e.message), `${param}: ${e}`);
        }
    }
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
