// auth.js — `hetrun serve --api-key` (see test_serve_e2e.sh): /health is
// open, everything else wants the Bearer key (401 in OpenAI's error shape
// otherwise); /tokenize, /detokenize and /props in llama-server's shapes;
// the load-balancer gauges in /metrics.
'use strict';
const OpenAI = require('openai');
const { request } = require('./http.js');

const port = Number(process.env.PORT), key = process.env.KEY;
const auth = { headers: { authorization: `Bearer ${key}` } };
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

async function main() {
    const h = await request(port, 'GET', '/health');
    check(h.status === 200 && h.json.status === 'ok', `health needs no key: ${h.status}`);
    for (const [path, opts] of [['/v1/models', {}], ['/metrics', {}], ['/props', { headers: { authorization: 'Bearer wrong' } }],
                                ['/v1/models', { headers: { authorization: key } }]]) {
        const r = await request(port, 'GET', path, undefined, opts);
        check(r.status === 401 && r.json && r.json.error.code === 'invalid_api_key' && r.json.error.type &&
              'param' in r.json.error && r.headers['www-authenticate'] === 'Bearer', `${path} without the key: ${r.status} ${r.body}`);
    }
    const bad = await request(port, 'POST', '/v1/completions', '{"prompt":"hi"}');
    check(bad.status === 401, `POST without the key: ${bad.status}`);
    const wrong = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'not-it', maxRetries: 0 });
    try { await wrong.models.list(); check(false, 'wrong key accepted'); }
    catch (e) { check(e instanceof OpenAI.AuthenticationError && e.status === 401, `wrong key: ${e}`); }
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: key, maxRetries: 0 });
    const c = await client.chat.completions.create({ model: 'stories260K', messages: [{ role: 'user', content: 'Hi' }],
                                                     max_tokens: 6, user: 'tester', temperature: 0 },
                                                   { headers: { 'X-Session-Id': 'conv-42' } });
    check(c.choices[0].message.content.length > 0, 'chat with the key');

    // /tokenize, /detokenize, /props
    const t = await request(port, 'POST', '/tokenize', '{"content":"Once upon a time"}', auth);
    check(t.status === 200 && Array.isArray(t.json.tokens) && t.json.tokens.every(Number.isInteger) && t.json.tokens.length >= 4,
          `tokenize: ${t.body}`);
    const tp = await request(port, 'POST', '/tokenize', '{"content":"Once upon a time","with_pieces":true,"add_special":true}', auth);
    check(tp.status === 200 && tp.json.tokens.length === t.json.tokens.length + 1 && tp.json.tokens[1].id === t.json.tokens[0] &&
          typeof tp.json.tokens[1].piece === 'string', `tokenize with pieces and BOS: ${tp.body}`);
    const d = await request(port, 'POST', '/detokenize', JSON.stringify({ tokens: t.json.tokens }), auth);
    check(d.status === 200 && d.json.content.trim() === 'Once upon a time', `detokenize: ${d.body}`);
    const dbad = await request(port, 'POST', '/detokenize', '{"tokens":[1,-4]}', auth);
    check(dbad.status === 400 && dbad.json.error.param === 'tokens', `detokenize bad id: ${dbad.body}`);
    const tbad = await request(port, 'POST', '/tokenize', '{"content":"x","special":true}', auth);
    check(tbad.status === 400 && tbad.json.error.param === 'special', `tokenize unknown field: ${tbad.body}`);
    const p = await request(port, 'GET', '/props', undefined, auth);
    check(p.status === 200 && p.json.total_slots === 2 && /^\d+\.\d+\.\d+$/.test(p.json.version) &&
          p.json.default_generation_settings.n_ctx > 0 && typeof p.json.chat_template === 'string',
          `props: ${p.body.slice(0, 300)}`);
    const mr = await request(port, 'GET', '/metrics', undefined, auth);
    check(mr.status === 200 && /het_free_slots\{route="default"\} 2\n/.test(mr.body) && /het_ready 1\n/.test(mr.body),
          'metrics: free slots and ready');
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
