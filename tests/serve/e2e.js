// e2e.js — the openai client (v4) against `hetrun serve` (see test_serve_e2e.sh).
'use strict';
const OpenAI = require('openai');
const fs = require('fs');

const client = new OpenAI({ baseURL: `http://127.0.0.1:${process.env.PORT}/v1`, apiKey: 'none', maxRetries: 0 });
const prompt = process.env.PROMPT;
const maxTokens = Number(process.env.MAX_TOKENS);
let pass = 0, fail = 0;
function check(cond, what) {
    if (cond) pass++;
    else { fail++; console.log(`FAIL: ${what}`); }
}

async function main() {
    const models = await client.models.list();
    const ids = models.data.map((m) => m.id);
    check(ids.includes('stories260K'), `models list: ${JSON.stringify(ids)}`);
    const model = 'stories260K';

    // greedy completion equals `hetrun run --temp 0` (which prints prompt + text + "\n")
    const run = fs.readFileSync(process.env.EXPECT_FILE, 'utf8');
    const { data: c, response } = await client.completions
        .create({ model, prompt, max_tokens: maxTokens, temperature: 0 }).withResponse();
    const text = c.choices[0].text;
    check(prompt + text + '\n' === run, `greedy text differs from hetrun run:\n  serve: ${JSON.stringify(prompt + text)}\n  run:   ${JSON.stringify(run)}`);
    check(['stop', 'length'].includes(c.choices[0].finish_reason), `finish_reason ${c.choices[0].finish_reason}`);
    check(c.object === 'text_completion' && c.model === model, 'object and model');
    check(c.usage.prompt_tokens === 5 && c.usage.completion_tokens > 0 &&
          c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens, `usage ${JSON.stringify(c.usage)}`);
    check(response.headers.get('x-het-model') === model && response.headers.get('x-het-devices') === 'cpu' &&
          response.headers.get('x-het-route') === 'default', 'x-het-* headers');
    check(c.het && c.het.route === 'default' && c.het.model === model && typeof c.het.reason === 'string', `het object ${JSON.stringify(c.het)}`);

    // the same, streamed
    const stream = await client.completions.create({ model, prompt, max_tokens: maxTokens, temperature: 0, stream: true });
    let streamed = '', finish = null, chunks = 0;
    for await (const ch of stream) {
        chunks++;
        streamed += ch.choices[0].text;
        if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    }
    check(streamed === text, `streamed text differs: ${JSON.stringify(streamed)}`);
    check(finish === c.choices[0].finish_reason && chunks > 2, `stream finish ${finish}, ${chunks} chunks`);

    // chat, whole and streamed, with usage in the stream
    const messages = [{ role: 'system', content: 'You tell stories.' }, { role: 'user', content: 'Tell me about a cat.' }];
    const chat = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0 });
    const content = chat.choices[0].message.content;
    check(chat.object === 'chat.completion' && chat.choices[0].message.role === 'assistant' && typeof content === 'string' && content.length > 0, `chat ${JSON.stringify(chat.choices[0])}`);
    check(chat.usage.completion_tokens > 0 && chat.usage.completion_tokens <= 24, `chat usage ${JSON.stringify(chat.usage)}`);
    const cs = await client.chat.completions.create({ model, messages, max_tokens: 24, temperature: 0, stream: true,
                                                     stream_options: { include_usage: true } });
    let chatStreamed = '', role = null, usage = null;
    for await (const ch of cs) {
        if (ch.usage) usage = ch.usage;
        if (!ch.choices.length) continue;
        if (ch.choices[0].delta.role) role = ch.choices[0].delta.role;
        chatStreamed += ch.choices[0].delta.content || '';
    }
    check(chatStreamed === content && role === 'assistant', `chat stream ${JSON.stringify(chatStreamed)} vs ${JSON.stringify(content)}`);
    check(usage && usage.completion_tokens === chat.usage.completion_tokens, `stream usage ${JSON.stringify(usage)}`);

    // seeded sampling is reproducible; stop strings end the text
    const s1 = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 1, top_p: 0.9, seed: 7 });
    const s2 = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 1, top_p: 0.9, seed: 7 });
    check(s1.choices[0].text === s2.choices[0].text, 'same seed, same text');
    const st = await client.completions.create({ model, prompt, max_tokens: maxTokens, temperature: 0, stop: ['little'] });
    check(st.choices[0].finish_reason === 'stop' && !st.choices[0].text.includes('little') &&
          text.startsWith(st.choices[0].text), `stop string: ${JSON.stringify(st.choices[0].text)}`);

    // errors arrive as the client's typed exceptions with OpenAI's error object
    try {
        await client.completions.create({ model: 'no-such-model', prompt });
        check(false, 'unknown model accepted');
    } catch (e) {
        check(e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found' && e.param === 'model', `unknown model: ${e}`);
    }
    try {
        await client.chat.completions.create({ model, messages: [] });
        check(false, 'empty messages accepted');
    } catch (e) {
        check(e instanceof OpenAI.BadRequestError && e.param === 'messages', `empty messages: ${e}`);
    }
    console.log(`${pass} passed, ${fail} failed`);
    process.exit(fail ? 1 : 0);
}
main().catch((e) => { console.log(`FAIL: ${e.stack || e}`); process.exit(1); });
