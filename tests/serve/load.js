// load.js — bounded load on loopback (see test_serve_load.sh): CLIENTS
// concurrent clients x PER_CLIENT requests of mixed kinds and lengths,
// streamed and not, some abandoned mid-stream. Every request must end in a
// complete answer or a clean error, the server's books must balance (each
// admitted request finished exactly once, nothing left active or queued),
// and its resident memory must come back to the level after a warm-up round.
'use strict';
const http = require('http');
const fs = require('fs');
const { request, sseData, metrics, sum, sleep } = require('./http.js');

const port = Number(process.env.PORT), pid = Number(process.env.SERVER_PID);
const CLIENTS = Number(process.env.CLIENTS || 16), PER_CLIENT = Number(process.env.PER_CLIENT || 20);
const RSS_SLACK_KB = Number(process.env.RSS_SLACK_KB || 16384);
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

let seed = 12345;
function rand(n) { seed = (seed * 1103515245 + 12345) % 2147483648; return (seed >>> 12) % n; }

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });   // one connection per client
const words = 'Once upon a time there was a little girl named Lily who liked to play in the park with her dog. ';

function makeRequest() {
    const k = rand(6);
    const prompt = k === 3 ? words.repeat(5 + rand(25)) : ['Once upon a time', 'The cat', 'Tom and Sue'][rand(3)];
    const max_tokens = 4 + rand(k === 3 ? 8 : 48);
    if (k === 2 || k === 5)
        return { path: '/v1/chat/completions', stream: k === 2, abort: false,
                 body: { messages: [{ role: 'user', content: prompt }], max_tokens, stream: k === 2,
                         stream_options: k === 2 ? { include_usage: true } : undefined, stop: k === 5 ? ['.'] : undefined } };
    return { path: '/v1/completions', stream: k === 1 || k === 4, abort: k === 4,
             body: { prompt, max_tokens: k === 4 ? 200 : max_tokens, stream: k === 1 || k === 4, temperature: rand(2) ? 0 : 0.8 } };
}

// one request; resolves to 'ok' | 'rejected' | 'aborted' | 'bad:<why>'
function perform(rq, clientAgent) {
    return new Promise((resolve) => {
        const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: rq.path,
                                   agent: rq.abort ? false : clientAgent, headers: { 'content-type': 'application/json' } },
            (res) => {
                const parts = [];
                res.on('data', (d) => {
                    parts.push(d);
                    if (rq.abort && Buffer.concat(parts).toString().includes('"text":"') && parts.length > 1) {
                        req.destroy();
                        resolve('aborted');
                    }
                });
                res.on('end', () => resolve(judge(rq, res, Buffer.concat(parts).toString('utf8'))));
                res.on('error', () => resolve(rq.abort ? 'aborted' : 'bad:response error'));
            });
        req.setTimeout(60000, () => { req.destroy(); resolve('bad:timeout'); });
        req.on('error', (e) => resolve(rq.abort ? 'aborted' : `bad:${e.message}`));
        req.end(JSON.stringify(rq.body));
    });
}

function judge(rq, res, text) {
    if (res.statusCode === 503) {
        try { return JSON.parse(text).error.code === 'queue_full' ? 'rejected' : `bad:503 ${text}`; }
        catch (_) { return `bad:503 not JSON: ${text}`; }
    }
    if (res.statusCode !== 200) return `bad:status ${res.statusCode}: ${text.slice(0, 200)}`;
    if (!rq.stream) {
        let j;
        try { j = JSON.parse(text); } catch (_) { return `bad:not JSON: ${text.slice(0, 200)}`; }
        const c = j.choices && j.choices[0];
        const ok = c && ['stop', 'length'].includes(c.finish_reason) && j.usage && j.usage.completion_tokens <= rq.body.max_tokens;
        return ok ? 'ok' : `bad:incomplete ${text.slice(0, 200)}`;
    }
    const data = sseData(text);
    if (data[data.length - 1] !== '[DONE]') return `bad:stream without [DONE]: ${text.slice(-200)}`;
    let finish = null;
    for (const d of data.slice(0, -1)) {
        let j;
        try { j = JSON.parse(d); } catch (_) { return `bad:stream chunk not JSON: ${d}`; }
        if (j.error) return `bad:stream error ${d}`;
        if (j.choices.length && j.choices[0].finish_reason) finish = j.choices[0].finish_reason;
    }
    return ['stop', 'length'].includes(finish) ? 'ok' : `bad:stream finish ${finish}`;
}

async function round(clients, per) {
    const tally = { ok: 0, rejected: 0, aborted: 0, bad: 0 };
    await Promise.all(Array.from({ length: clients }, async () => {
        const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
        for (let i = 0; i < per; i++) {
            const r = await perform(makeRequest(), a);
            if (r.startsWith('bad:')) { tally.bad++; if (tally.bad <= 5) console.log(`FAIL: ${r}`); }
            else tally[r]++;
            if (r === 'rejected') await sleep(100);   // as Retry-After asks, roughly
        }
        a.destroy();
    }));
    return tally;
}

function rssKb() {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : NaN;
}

async function idle() {
    for (let i = 0; i < 400; i++) {
        const m = await metrics(port);
        if (sum(m, 'het_active_sequences') === 0 && sum(m, 'het_queue_depth') === 0 && m['het_open_connections'] <= 1) return m;
        await sleep(25);
    }
    check(false, 'the server did not become idle');
    return metrics(port);
}

function finished(m) { return sum(m, 'het_requests_total'); }

async function main() {
    const t0 = Date.now();
    const warm = await round(CLIENTS, 3);
    check(warm.bad === 0, `warm-up: ${JSON.stringify(warm)}`);
    const m0 = await idle();
    const rss0 = rssKb();
    const tally = await round(CLIENTS, PER_CLIENT);
    const m1 = await idle();
    const rss1 = rssKb();
    const total = CLIENTS * PER_CLIENT;
    console.log(`${total} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(tally)}; ` +
                `RSS ${rss0} kB after warm-up, ${rss1} kB after the load`);
    check(tally.ok + tally.rejected + tally.aborted + tally.bad === total, 'every request answered');
    check(tally.bad === 0, `${tally.bad} requests ended badly`);
    check(tally.ok + tally.aborted > total / 2, `most requests were served (${tally.ok} + ${tally.aborted} abandoned)`);
    check(tally.aborted > 0, 'some clients disconnected early');
    // books: every admitted request (completed or abandoned) finished exactly once
    const admitted = finished(m1) - finished(m0);
    check(admitted === tally.ok + tally.aborted, `finished requests ${admitted} != answered ${tally.ok} + abandoned ${tally.aborted}`);
    check(sum(m1, 'het_requests_total', 'finish="error"') === 0, 'no generation errors');
    check(sum(m1, 'het_rejected_total', 'queue_full') - sum(m0, 'het_rejected_total', 'queue_full') === tally.rejected, 'rejections counted');
    const steps = sum(m1, 'het_batch_steps_total') - sum(m0, 'het_batch_steps_total');
    const seqs = sum(m1, 'het_batch_sequences_total') - sum(m0, 'het_batch_sequences_total');
    console.log(`batching: ${seqs} sequence-steps in ${steps} steps (${(seqs / steps).toFixed(2)} per step)`);
    check(seqs > 1.5 * steps, 'concurrent requests shared decode steps');
    check(rss1 <= rss0 + RSS_SLACK_KB, `RSS grew from ${rss0} kB to ${rss1} kB (slack ${RSS_SLACK_KB} kB)`);
    const h = await request(port, 'GET', '/health');
    check(h.status === 200, 'health after the load');
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
