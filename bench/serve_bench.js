// serve_bench.js — one `hetrun serve` instance measured from the client
// side (Node built-ins only; driven by serve_bench.sh):
//  latency: one request at a time per prompt length, streamed, OUT tokens
//    generated (ignore_eos): time to first token, decode tokens/s after it,
//    and effective tokens/s = OUT / (time to first token + decode time);
//  throughput: C concurrent clients, each sending REQS requests of
//    CONC_PROMPT tokens: generated tokens / wall time.
// TEMPERATURE (default 0: greedy) is every request's temperature; the API's
// own default is 1, and sampling a large vocabulary is work of its own.
// Prints one JSON object per measurement on stdout.
'use strict';
const http = require('http');

const port = Number(process.env.PORT);
const lengths = (process.env.LENGTHS || '128 256 512 1024 2048 4096 8192').split(/\s+/).filter(Boolean).map(Number);
const out = Number(process.env.OUT || 256);
const clients = (process.env.CLIENTS || '1 4 16').split(/\s+/).filter(Boolean).map(Number);
const reqs = Number(process.env.REQS || 1);
const concPrompt = Number(process.env.CONC_PROMPT || 128);
const label = process.env.LABEL || 'server';
const temperature = Number(process.env.TEMPERATURE || 0);

// token ids valid in any vocabulary of at least 256 entries
const prompt = (n, salt) => Array.from({ length: n }, (_, i) => 3 + ((i + salt) * 37) % 250);

function stream(body) {
    return new Promise((resolve, reject) => {
        const t0 = process.hrtime.bigint();
        let first = 0, buf = '', usage = null, route = null;
        const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v1/completions', agent: false,
                                   headers: { 'content-type': 'application/json' } }, (res) => {
            route = res.headers['x-het-route'];
            if (res.statusCode !== 200) { res.resume(); reject(new Error(`status ${res.statusCode}`)); return; }
            res.setEncoding('utf8');
            res.on('data', (d) => {
                buf += d;
                if (!first && /"text":"[^"]/.test(buf)) first = process.hrtime.bigint();
            });
            res.on('end', () => {
                const end = process.hrtime.bigint();
                for (const f of buf.split('\n\n')) {
                    if (!f.startsWith('data: {')) continue;
                    const j = JSON.parse(f.slice(6));
                    if (j.usage) usage = j.usage;
                }
                const ms = (a, b) => Number(b - a) / 1e6;
                resolve({ ttft_ms: ms(t0, first || end), total_ms: ms(t0, end), n_out: usage ? usage.completion_tokens : 0, route });
            });
        });
        req.on('error', reject);
        req.end(JSON.stringify(body));
    });
}

const request = (n, salt) => stream({ prompt: prompt(n, salt), max_tokens: out, temperature, ignore_eos: true,
                                      stream: true, stream_options: { include_usage: true } });

async function main() {
    await request(16, 0); // warm-up: plans, caches
    for (const n of lengths) {
        const r = await request(n, n);
        const decode_ms = r.total_ms - r.ttft_ms;
        console.log(JSON.stringify({ kind: 'latency', label, prompt: n, out: r.n_out, route: r.route,
                                     ttft_ms: +r.ttft_ms.toFixed(1), decode_tps: +((r.n_out - 1) * 1000 / decode_ms).toFixed(2),
                                     effective_tps: +(r.n_out * 1000 / r.total_ms).toFixed(2) }));
    }
    for (const c of clients) {
        const t0 = Date.now();
        const results = await Promise.all(Array.from({ length: c }, async (_, k) => {
            const rs = [];
            for (let i = 0; i < reqs; i++) rs.push(await request(concPrompt, 1000 * k + i));
            return rs;
        }));
        const wall = (Date.now() - t0) / 1000;
        const flat = results.flat();
        const tokens = flat.reduce((s, r) => s + r.n_out, 0);
        const ttft = flat.map((r) => r.ttft_ms).sort((a, b) => a - b);
        console.log(JSON.stringify({ kind: 'throughput', label, clients: c, requests: flat.length, tokens,
                                     wall_s: +wall.toFixed(2), tps: +(tokens / wall).toFixed(2),
                                     ttft_p50_ms: +ttft[Math.floor(ttft.length / 2)].toFixed(1),
                                     ttft_max_ms: +ttft[ttft.length - 1].toFixed(1) }));
    }
}
main().catch((e) => { console.error(`serve_bench: ${e.stack || e}`); process.exit(1); });
