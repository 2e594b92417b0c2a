// queue_full.js — with --parallel 1 --queue 1: a long stream holds the slot,
// a second request waits, a third gets 503 with Retry-After; when the first
// client disconnects its slot is freed and the second completes. While the
// queue is full /health answers 503 ("busy") and /metrics shows no free slot.
'use strict';
const http = require('http');
const { request, metrics, sum, sleep } = require('./http.js');

const port = Number(process.env.PORT);
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

async function until(pred, what) {
    for (let i = 0; i < 200; i++) {
        if (await pred()) return true;
        await sleep(25);
    }
    check(false, `timed out waiting for ${what}`);
    return false;
}

async function main() {
    // 1: a long stream that we stop reading and then abandon
    let first;
    const firstStarted = new Promise((resolve) => {
        first = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/completions', agent: false,
                               headers: { 'content-type': 'application/json' } }, (res) => {
            res.once('data', () => resolve(res.statusCode));
        });
        first.on('error', () => {});
        first.end(JSON.stringify({ prompt: 'Once upon a time', max_tokens: 1900, stream: true, temperature: 1 }));
    });
    check(await firstStarted === 200, 'first request streams');
    await until(async () => sum(await metrics(port), 'het_active_sequences') === 1, 'the first request to hold the slot');
    // 2: waits in the queue
    const second = request(port, 'POST', '/v1/completions', '{"prompt":"Once upon a time","max_tokens":4}', { agent: false });
    await until(async () => sum(await metrics(port), 'het_queue_depth') === 1, 'the second request to queue');
    // 3: no room
    const third = await request(port, 'POST', '/v1/completions', '{"prompt":"hi","max_tokens":4}', { agent: false });
    check(third.status === 503 && third.json && third.json.error.code === 'queue_full', `third: ${third.status} ${third.body}`);
    check(third.headers['retry-after'] === '1', 'Retry-After on 503');
    // a load balancer sees the replica as full: /health 503, /metrics no free slot
    const h = await request(port, 'GET', '/health', undefined, { agent: false });
    check(h.status === 503 && h.json && h.json.status === 'busy', `health with a full queue: ${h.status} ${h.body}`);
    const mf = await metrics(port);
    check(sum(mf, 'het_free_slots') === 0 && sum(mf, 'het_queue_capacity') === 1 && sum(mf, 'het_ready') === 1,
          'metrics: no free slot, queue capacity 1, ready');
    // the first client goes away: its slot goes to the second
    first.destroy();
    const r2 = await second;
    check(r2.status === 200 && r2.json.usage.completion_tokens === 4, `second after the disconnect: ${r2.body.slice(0, 200)}`);
    await until(async () => {
        const m = await metrics(port);
        return sum(m, 'het_active_sequences') === 0 && sum(m, 'het_requests_total', 'finish="cancelled"') === 1;
    }, 'the abandoned request to be counted as cancelled');
    const m = await metrics(port);
    check(sum(m, 'het_rejected_total', 'queue_full') === 1, 'queue_full counted');
    check(sum(m, 'het_free_slots') === 1, 'the slot is free again');
    const h2 = await request(port, 'GET', '/health', undefined, { agent: false });
    check(h2.status === 200 && h2.json.status === 'ok', `health after: ${h2.status}`);
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
