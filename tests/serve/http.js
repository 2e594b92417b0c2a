// http.js — tiny raw-HTTP helpers for the serve tests (Node built-ins only).
'use strict';
const http = require('http');

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

// request(port, method, path, body(string|Buffer|undefined), opts) ->
//   { status, headers, body(string), json(parsed or null) }
function request(port, method, path, body, opts = {}) {
    return new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port, method, path, agent: opts.agent || agent,
                                   headers: Object.assign({ 'content-type': 'application/json' }, opts.headers || {}) },
            (res) => {
                const parts = [];
                res.on('data', (d) => parts.push(d));
                res.on('end', () => {
                    const text = Buffer.concat(parts).toString('utf8');
                    let json = null;
                    try { json = JSON.parse(text); } catch (_) { /* not JSON */ }
                    resolve({ status: res.statusCode, headers: res.headers, body: text, json });
                });
                res.on('error', reject);
            });
        req.on('error', reject);
        if (opts.timeout) req.setTimeout(opts.timeout, () => req.destroy(new Error('timeout')));
        if (body !== undefined) req.write(body);
        req.end();
    });
}

// parse a server-sent-events body into its data payloads
function sseData(text) {
    return text.split('\n\n').filter((f) => f.startsWith('data: ')).map((f) => f.slice(6));
}

async function metrics(port) {
    const r = await request(port, 'GET', '/metrics');
    const m = {};
    for (const line of r.body.split('\n')) {
        if (!line || line.startsWith('#')) continue;
        const i = line.lastIndexOf(' ');
        m[line.slice(0, i)] = Number(line.slice(i + 1));
    }
    return m;
}

// sum of every sample whose name (with labels) starts with prefix and contains all of parts
function sum(m, prefix, ...parts) {
    let s = 0;
    for (const [k, v] of Object.entries(m)) if (k.startsWith(prefix) && parts.every((p) => k.includes(p))) s += v;
    return s;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

module.exports = { request, sseData, metrics, sum, sleep, agent };
