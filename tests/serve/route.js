// route.js — --long-model routing (see test_serve_route.sh). Mode "given":
// threshold 20 tokens, default context 256; mode "derived": no threshold.
'use strict';
const { request, sseData, metrics, sum } = require('./http.js');

const port = Number(process.env.PORT), mode = process.env.MODE, longId = process.env.LONG_ID;
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

const C = '/v1/completions', H = '/v1/chat/completions';
const long = 'Once upon a time there was a little girl named Lily. She liked to play with her red ball in the park.';

async function expectRoute(path, body, route, reasonPart, what) {
    const r = await request(port, 'POST', path, JSON.stringify(body));
    const model = route === 'long' ? longId : 'stories260K';
    check(r.status === 200, `${what}: status ${r.status} ${r.body.slice(0, 200)}`);
    check(r.headers['x-het-route'] === route && r.headers['x-het-model'] === model &&
          r.headers['x-het-devices'] === 'cpu', `${what}: headers ${r.headers['x-het-route']} ${r.headers['x-het-model']}`);
    const het = body.stream ? JSON.parse(sseData(r.body)[0]).het : r.json && r.json.het;
    check(het && het.route === route && het.model === model && het.reason.includes(reasonPart),
          `${what}: het ${JSON.stringify(het)} (want route ${route}, reason with '${reasonPart}')`);
    return r;
}

async function given() {
    const models = await request(port, 'GET', '/v1/models');
    check(models.json.data.map((m) => m.id).join() === `stories260K,${longId}`, `models ${models.body}`);
    await expectRoute(C, { prompt: 'Once upon a time', max_tokens: 8 }, 'default', '< threshold 20 (given)', 'short prompt');
    const a = await expectRoute(C, { prompt: long, max_tokens: 8, temperature: 0 }, 'long', '>= threshold 20 (given)', 'long prompt');
    // either side of the threshold, exactly (token-id prompts: no tokenizer in the way)
    const ids = (n) => [1].concat(Array.from({ length: n - 1 }, (_, i) => 300 + i));
    await expectRoute(C, { prompt: ids(19), max_tokens: 4 }, 'default', 'prompt of 19 tokens', '19 tokens');
    await expectRoute(C, { prompt: ids(20), max_tokens: 4 }, 'long', 'prompt of 20 tokens', '20 tokens');
    await expectRoute(C, { prompt: 'Once upon a time', max_tokens: 300 }, 'long', 'default context', 'does not fit the default context');
    await expectRoute(H, { messages: [{ role: 'user', content: long }], max_tokens: 4 }, 'long', 'threshold', 'long chat');
    await expectRoute(C, { prompt: long, max_tokens: 4, stream: true }, 'long', 'threshold', 'long prompt streamed');
    await expectRoute(C, { prompt: long, max_tokens: 4, het_route: 'default' }, 'default', 'requested', 'pinned with het_route');
    // the long route computes what the default would (same weights here)
    const b = await request(port, 'POST', C, JSON.stringify({ prompt: long, max_tokens: 8, temperature: 0, het_route: 'default' }));
    check(a.json.choices[0].text === b.json.choices[0].text, 'same text on both routes');
    const m = await metrics(port);
    check(sum(m, 'het_requests_total{route="long"') === 5 && sum(m, 'het_requests_total{route="default"') === 4,
          `requests by route: long ${sum(m, 'het_requests_total{route="long"')}, default ${sum(m, 'het_requests_total{route="default"')}`);
    check(m['het_route_threshold_tokens{derived="0"}'] === 20, 'threshold in metrics');
    check(sum(m, 'het_device_busy_seconds_total{route="long"') > 0, 'long route device time in metrics');
}

async function derived() {
    const h = await request(port, 'GET', '/health');
    const t = h.json.threshold;
    check(h.json.threshold_derived === true && Number.isInteger(t) && t >= 1, `health ${h.body}`);
    const m = await metrics(port);
    check(m['het_route_threshold_tokens{derived="1"}'] === t, 'derived threshold in metrics');
    for (const n of [5, 40]) {
        const prompt = [1].concat(Array.from({ length: n - 1 }, (_, i) => 300 + i));
        await expectRoute(C, { prompt, max_tokens: 4 }, n >= t ? 'long' : 'default', '(derived)', `${n} tokens, threshold ${t}`);
    }
}

(mode === 'given' ? given() : derived()).then(() => {
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}).catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
