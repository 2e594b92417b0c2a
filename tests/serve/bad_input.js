// bad_input.js — malformed and abusive requests against `hetrun serve`
// (see test_serve_bad.sh): each gets the right status and an OpenAI-style
// error object naming the field, and the server keeps answering.
'use strict';
const net = require('net');
const { request, metrics, sum, sleep } = require('./http.js');

const port = Number(process.env.PORT);
const maxConns = Number(process.env.MAX_CONNS);
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

function checkError(r, status, param, code, what) {
    const e = r.json && r.json.error;
    check(r.status === status, `${what}: status ${r.status}, want ${status}: ${r.body.slice(0, 300)}`);
    check(e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' &&
          'param' in e && 'code' in e, `${what}: error object ${r.body.slice(0, 300)}`);
    if (e) {
        check(e.param === param, `${what}: param ${JSON.stringify(e.param)}, want ${JSON.stringify(param)}`);
        if (code !== undefined) check(e.code === code, `${what}: code ${JSON.stringify(e.code)}, want ${JSON.stringify(code)}`);
    }
}

const C = '/v1/completions', H = '/v1/chat/completions';
const cases = [
    // [what, path, body, status, param, code]
    ['malformed JSON', C, '{"prompt": "hi"', 400, null],
    ['empty body', C, '', 400, null],
    ['array body', C, '[1,2,3]', 400, null],
    ['string body', C, '"hello"', 400, null],
    ['invalid UTF-8', C, Buffer.concat([Buffer.from('{"prompt":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), 400, null],
    ['prompt missing', C, '{"max_tokens":4}', 400, 'prompt'],
    ['prompt wrong type', C, '{"prompt":{"a":1}}', 400, 'prompt'],
    ['bad token id', C, '{"prompt":[1,2,-5]}', 400, 'prompt[2]'],
    ['token id outside the vocabulary', C, '{"prompt":[1,99999]}', 400, 'prompt'],
    ['max_tokens string', C, '{"prompt":"hi","max_tokens":"10"}', 400, 'max_tokens'],
    ['max_tokens negative', C, '{"prompt":"hi","max_tokens":-1}', 400, 'max_tokens'],
    ['temperature out of range', C, '{"prompt":"hi","temperature":7}', 400, 'temperature'],
    ['top_p wrong type', C, '{"prompt":"hi","top_p":"all"}', 400, 'top_p'],
    ['stream wrong type', C, '{"prompt":"hi","stream":"yes"}', 400, 'stream'],
    ['stop wrong type', C, '{"prompt":"hi","stop":42}', 400, 'stop'],
    ['n > 16', C, '{"prompt":"hi","n":17}', 400, 'n'],
    ['unknown model', C, '{"model":"gpt-17","prompt":"hi"}', 404, 'model', 'model_not_found'],
    ['model wrong type', C, '{"model":["x"],"prompt":"hi"}', 400, 'model'],
    ['long route not configured', C, '{"prompt":"hi","het_route":"long"}', 400, 'het_route'],
    ['prompt over the context', C, JSON.stringify({ prompt: 'Once upon a time '.repeat(700) }), 400, 'prompt', 'context_length_exceeded'],
    ['prompt + max_tokens over the context', C, '{"prompt":"hi","max_tokens":5000}', 400, 'max_tokens', 'context_length_exceeded'],
    ['messages missing', H, '{"model":"stories260K"}', 400, 'messages'],
    ['messages empty', H, '{"messages":[]}', 400, 'messages'],
    ['message not an object', H, '{"messages":["hi"]}', 400, 'messages[0]'],
    ['role missing', H, '{"messages":[{"content":"hi"}]}', 400, 'messages[0].role'],
    ['unknown role', H, '{"messages":[{"role":"user","content":"a"},{"role":"robot","content":"hi"}]}', 400, 'messages[1].role'],
    ['content wrong type', H, '{"messages":[{"role":"user","content":12}]}', 400, 'messages[0].content'],
    ['chat invalid JSON', H, '{"messages":[{"role":"user","content":"hi"}', 400, null],
    ['body over the size limit', C, JSON.stringify({ prompt: 'x'.repeat(2 << 20) }), 413, null, 'request_too_large'],
    // no field is silently ignored
    ['unknown field', C, '{"prompt":"hi","frobnicate":[1,{"x":null}]}', 400, 'frobnicate', 'unknown_parameter'],
    ['llama.cpp field het lacks', C, '{"prompt":"hi","mirostat":2}', 400, 'mirostat', 'unknown_parameter'],
    ['tools', H, '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}', 400, 'tools'],
    ['json_schema', H, '{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{}}}}', 400, 'response_format.type'],
    ['logit_bias outside the vocabulary', C, '{"prompt":"hi","logit_bias":{"99999":5}}', 400, 'logit_bias'],
    ['echo', C, '{"prompt":"hi","echo":true}', 400, 'echo'],
    ['n = 0 on chat', H, '{"messages":[{"role":"user","content":"hi"}],"n":0}', 400, 'n'],
    ['best_of > 1', C, '{"prompt":"hi","best_of":2}', 400, 'best_of', 'unsupported_value'],
];

async function main() {
    for (const [what, path, body, status, param, code] of cases)
        checkError(await request(port, 'POST', path, body), status, param, code, what);
    checkError(await request(port, 'GET', C), 405, null, 'method_not_allowed', 'GET on a POST endpoint');
    checkError(await request(port, 'POST', '/v1/models', '{}'), 405, null, 'method_not_allowed', 'POST on a GET endpoint');
    checkError(await request(port, 'GET', '/v1/nothing'), 404, null, 'not_found', 'unknown path');

    // the server still answers normally; an empty logit_bias is fine
    const ok = await request(port, 'POST', C, '{"prompt":"hi","max_tokens":3,"logit_bias":{}}');
    check(ok.status === 200 && ok.json && ok.json.choices[0].text !== undefined, `after refusals: ${ok.status} ${ok.body.slice(0, 200)}`);
    const chat = await request(port, 'POST', H, '{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":3}');
    check(chat.status === 200 && chat.json.choices[0].message.role === 'assistant', `content parts: ${chat.body.slice(0, 200)}`);

    // too many connections: hold maxConns idle sockets open, the next request gets 503
    const idle = [];
    for (let i = 0; i < maxConns; i++) {
        idle.push(await new Promise((res, rej) => { const s = net.connect(port, '127.0.0.1', () => res(s)); s.on('error', rej); }));
    }
    await sleep(200);
    const busy = await request(port, 'GET', '/health', undefined, { agent: false });
    checkError(busy, 503, null, 'too_many_connections', 'connection limit');
    check(busy.headers['retry-after'] !== undefined, 'connection limit: Retry-After header');
    for (const s of idle) s.destroy();

    // the server still answers, and counted what it refused
    let health = null;
    for (let i = 0; i < 50 && !(health && health.status === 200); i++) {
        await sleep(100);
        health = await request(port, 'GET', '/health', undefined, { agent: false });
    }
    check(health.status === 200 && health.json.status === 'ok', `health after abuse: ${health.status}`);
    const after = await request(port, 'POST', C, '{"prompt":"Once upon a time","max_tokens":8,"temperature":0}', { agent: false });
    check(after.status === 200 && after.json.usage.completion_tokens === 8, `completion after abuse: ${after.body.slice(0, 200)}`);
    const m = await metrics(port);
    check(sum(m, 'het_rejected_total', 'too_many_connections') >= 1, 'metrics count the refused connection');
    check(sum(m, 'het_rejected_total', 'body_too_large') === 1, 'metrics count the large body');
    check(sum(m, 'het_http_responses_total', 'code="400"') >= 20, 'metrics count the 400s');
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
