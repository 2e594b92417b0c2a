// nginx.js — 40 requests through nginx in front of two `hetrun serve`
// replicas (see test_serve_nginx.sh), with the official openai client; one
// replica is killed (SIGKILL) mid-run. Every request must end in a complete
// answer or a clean retryable error (HTTP 502/503/504 or a connection
// error), within a bounded time. Prints the figures: requests, complete,
// failed, retries by nginx (from its log) and by the client.
'use strict';
const OpenAI = require('openai');
const fs = require('fs');

const port = Number(process.env.NGINX_PORT);
const victim = Number(process.env.VICTIM_PID);
const victimAddr = `127.0.0.1:${process.env.VICTIM_PORT}`;
const N = 40, CONCURRENCY = 6, KILL_AFTER = 12, MAX_TOKENS = 48;
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

// count every HTTP attempt the client makes (its own retries included)
let attempts = 0;
const countingFetch = (url, init) => { attempts++; return fetch(url, init); };
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 2, timeout: 20000,
                            fetch: countingFetch });

function retryable(e) {
    return e instanceof OpenAI.APIConnectionError || e instanceof OpenAI.APIConnectionTimeoutError ||
           (e instanceof OpenAI.APIError && [502, 503, 504].includes(e.status));
}

// a stream whose connection closes mid-body: fetch reports "terminated"
// (undici) or a reset; the client may resend the request
function cutStream(e) {
    return (e instanceof TypeError && /terminated/.test(e.message)) || ['ECONNRESET', 'UND_ERR_SOCKET'].includes(e.code) ||
           (e.cause && ['ECONNRESET', 'UND_ERR_SOCKET'].includes(e.cause.code));
}

// one request: i even streams, i % 3 == 0 carries a session key
async function one(i) {
    const session = i % 3 === 0 ? `conv-${i % 4}` : null;
    const opts = session ? { headers: { 'X-Session-Id': session } } : {};
    const body = { model: 'stories260K', max_tokens: MAX_TOKENS, temperature: 0.8, seed: i, ignore_eos: true };
    const t0 = Date.now();
    try {
        if (i % 2 === 0) {
            const stream = await client.completions.create(Object.assign({ prompt: 'Once upon a time', stream: true,
                                                                          stream_options: { include_usage: true } }, body), opts);
            let finish = null, usage = null;
            try {
                for await (const ch of stream) {
                    if (ch.usage) usage = ch.usage;
                    if (ch.choices.length && ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
                }
            } catch (e) {
                return { i, ok: false, retryable: cutStream(e), why: `stream cut: ${e.constructor.name}: ${e.message}`,
                         ms: Date.now() - t0 };
            }
            // a stream cut by the kill ends without a finish_reason or usage
            if (finish !== 'length' || !usage || usage.completion_tokens !== MAX_TOKENS)
                return { i, ok: false, retryable: true, why: `stream cut (finish ${finish})`, ms: Date.now() - t0 };
            return { i, ok: true, ms: Date.now() - t0 };
        }
        const { data, response } = await client.chat.completions
            .create(Object.assign({ messages: [{ role: 'user', content: `Story ${i}` }] }, body), opts).withResponse();
        const complete = data.choices[0].finish_reason === 'length' && data.usage.completion_tokens === MAX_TOKENS;
        return { i, ok: complete, why: complete ? '' : `incomplete ${JSON.stringify(data.usage)}`, ms: Date.now() - t0,
                 session, upstream: response.headers.get('x-upstream') };
    } catch (e) {
        return { i, ok: false, retryable: retryable(e), why: `${e.constructor.name}: ${e.message}`, ms: Date.now() - t0 };
    }
}

async function main() {
    // affinity: one conversation's turns all land on one replica, which
    // reuses the KV cache of the turns before (usage.prompt_tokens_details)
    const ups = [], messages = [{ role: 'user', content: 'Tell me a story about a dog.' }];
    let cached = [], prompts = [];
    for (let k = 0; k < 3; k++) {
        const { data, response } = await client.chat.completions.create({ model: 'stories260K', max_tokens: 16,
            temperature: 0, messages }, { headers: { 'X-Session-Id': 'sticky-1' } }).withResponse();
        ups.push(response.headers.get('x-upstream'));
        cached.push(data.usage.prompt_tokens_details.cached_tokens);
        prompts.push(data.usage.prompt_tokens);
        messages.push({ role: 'assistant', content: data.choices[0].message.content }, { role: 'user', content: 'And then?' });
    }
    check(ups[0] && ups.every((u) => u === ups[0]), `a session stays on one replica: ${ups}`);
    check(cached[1] >= prompts[0] / 2 && cached[2] >= prompts[1] / 2,
          `later turns reuse the replica's KV cache: cached ${cached} of prompts ${prompts}`);
    console.log(`affinity: turns of ${prompts} prompt tokens, ${cached} of them reused from the replica's cache`);
    attempts = 0;

    const results = [];
    let next = 0, done = 0, killed = false;
    const t0 = Date.now();
    async function worker() {
        while (next < N) {
            const r = await one(next++);
            results.push(r);
            if (++done === KILL_AFTER && !killed) {
                killed = true;
                process.kill(victim, 'SIGKILL');
            }
        }
    }
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const ms = Date.now() - t0;
    const ok = results.filter((r) => r.ok).length;
    const bad = results.filter((r) => !r.ok);
    const unclean = bad.filter((r) => !r.retryable);
    for (const r of unclean) console.log(`FAIL: request ${r.i}: ${r.why}`);
    check(killed, 'the replica was killed mid-run');
    check(results.length === N, `${results.length} of ${N} requests ended`);
    check(unclean.length === 0, `${unclean.length} requests ended in an error that is not cleanly retryable`);
    check(ok >= N / 2, `only ${ok} of ${N} complete`);
    // nginx's log: the upstream(s) of each request ("a, b" when it moved on)
    const log = fs.readFileSync(process.env.NGINX_LOG, 'utf8').trim().split('\n');
    const nginxRetries = log.filter((l) => l.includes(', ')).length;
    const afterKill = results.filter((r) => r.upstream).slice(-5);
    check(afterKill.every((r) => !r.upstream.endsWith(victimAddr) || r.upstream.includes(', ')),
          `late answers came from the survivor: ${afterKill.map((r) => r.upstream)}`);
    console.log(`nginx: ${N} requests, ${ok} complete, ${bad.length} failed (retryable: ${bad.filter((r) => r.retryable).length}), ` +
                `${nginxRetries} retried by nginx, ${attempts - N} retried by the client, ` +
                `${ms} ms in all, slowest ${Math.max(...results.map((r) => r.ms))} ms`);
    for (const r of bad) console.log(`  request ${r.i}: ${r.why}`);
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
