// An OpenAI-compatible chat-completions server on node-llama-cpp's prebuilt llama.cpp, for the
// real-model test (tests/src/peers.rs starts it; tests/integration/real_model.rs talks to it).
//
//   node llama_server.mjs --model FILE.gguf --port PORT [--context 4096] [--threads 1]
//
// It serves what `toolhost chat` sends: `POST /v1/chat/completions` with `messages` (system,
// user and assistant text), `stream` (server-sent events, with a usage chunk when
// `stream_options.include_usage`), `temperature`, `max_tokens` and `response_format` of type
// `json_schema`, which is turned into a grammar so every reply matches the schema (as
// llama.cpp's own server does). `GET /health` answers 200 once the model is loaded. One
// request is evaluated at a time, on one context sequence, so a prompt that begins as the
// previous one did reuses its evaluated prefix.

import http from "node:http";
import { parseArgs } from "node:util";
import { getLlama, LlamaChat } from "node-llama-cpp";

const { values: opts } = parseArgs({
    options: {
        model: { type: "string" },
        port: { type: "string" },
        host: { type: "string", default: "127.0.0.1" },
        context: { type: "string", default: "4096" },
        threads: { type: "string", default: "1" },
    },
});
if (!opts.model || !opts.port) {
    console.error("usage: node llama_server.mjs --model FILE.gguf --port PORT");
    process.exit(2);
}

let ready = false;
let queue = Promise.resolve();
const state = {};

// Loads the model in the background; `/health` says 503 until it is done.
async function load() {
    // The prebuilt CPU binaries only: never a GPU probe, never a build from source.
    const llama = await getLlama({ gpu: false, build: "never", progressLogs: false });
    const model = await llama.loadModel({ modelPath: opts.model });
    const context = await model.createContext({
        contextSize: Number(opts.context),
        threads: Number(opts.threads),
    });
    Object.assign(state, { llama, model, sequence: context.getSequence() });
    ready = true;
}

// OpenAI messages as node-llama-cpp's chat history, ending with an empty model turn to fill.
function history(messages) {
    const text = (content) =>
        typeof content === "string"
            ? content
            : (content ?? [])
                  .filter((part) => part.type === "text")
                  .map((part) => part.text)
                  .join("\n");
    const items = messages.map((m) =>
        m.role === "assistant"
            ? { type: "model", response: [text(m.content)] }
            : m.role === "system"
              ? { type: "system", text: text(m.content) }
              : { type: "user", text: text(m.content) },
    );
    items.push({ type: "model", response: [] });
    return items;
}

async function complete(body, onText) {
    const { llama, model, sequence } = state;
    const format = body.response_format;
    const grammar =
        format?.type === "json_schema" && format.json_schema?.schema
            ? await llama.createGrammarForJsonSchema(format.json_schema.schema)
            : undefined;
    const chat = new LlamaChat({ contextSequence: sequence });
    try {
        const items = history(body.messages ?? []);
        let completion = 0;
        const result = await chat.generateResponse(items, {
            grammar,
            maxTokens: body.max_tokens ?? undefined,
            // llama.cpp's own server samples at 0.8 when the request names no temperature.
            temperature: body.temperature ?? 0.8,
            onTextChunk: onText,
            onToken: (tokens) => (completion += tokens.length),
        });
        const prompt = chat.chatWrapper
            .generateContextState({ chatHistory: items })
            .contextText.tokenize(model.tokenizer).length;
        const finish = result.metadata.stopReason === "maxTokens" ? "length" : "stop";
        return {
            text: result.response,
            finish,
            usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
        };
    } finally {
        chat.dispose({ disposeSequence: false });
    }
}

function chunk(id, created, model, delta, finish) {
    const choice = { index: 0, delta, finish_reason: finish ?? null };
    return { id, object: "chat.completion.chunk", created, model, choices: [choice] };
}

async function answer(req, res, body) {
    const id = `chatcmpl-${Date.now()}`;
    const created = Math.floor(Date.now() / 1000);
    const name = body.model ?? "local";
    if (body.stream) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
        const send = (value) => res.write(`data: ${JSON.stringify(value)}\n\n`);
        send(chunk(id, created, name, { role: "assistant", content: "" }));
        const done = await complete(body, (text) => send(chunk(id, created, name, { content: text })));
        send(chunk(id, created, name, {}, done.finish));
        if (body.stream_options?.include_usage) {
            send({ id, object: "chat.completion.chunk", created, model: name, choices: [], usage: done.usage });
        }
        res.end("data: [DONE]\n\n");
    } else {
        const done = await complete(body, () => {});
        const message = { role: "assistant", content: done.text };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
            JSON.stringify({
                id,
                object: "chat.completion",
                created,
                model: name,
                choices: [{ index: 0, message, finish_reason: done.finish }],
                usage: done.usage,
            }),
        );
    }
}

function fail(res, status, message) {
    if (res.headersSent) {
        res.end();
        return;
    }
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message, type: "server_error" } }));
}

const server = http.createServer((req, res) => {
    const path = req.url.split("?")[0];
    if (req.method === "GET" && path === "/health") {
        res.writeHead(ready ? 200 : 503, { "content-type": "application/json" });
        res.end(JSON.stringify({ status: ready ? "ok" : "loading model" }));
        return;
    }
    if (req.method !== "POST" || path !== "/v1/chat/completions") {
        fail(res, 404, `no route for ${req.method} ${path}`);
        return;
    }
    const parts = [];
    req.on("data", (part) => parts.push(part));
    req.on("end", () => {
        let body;
        try {
            body = JSON.parse(Buffer.concat(parts).toString("utf8"));
        } catch (e) {
            fail(res, 400, `the body is not JSON: ${e.message}`);
            return;
        }
        if (!ready) {
            fail(res, 503, "the model is still loading");
            return;
        }
        queue = queue
            .then(() => answer(req, res, body))
            .catch((e) => {
                console.error(`llama_server: ${e.stack ?? e}`);
                fail(res, 500, String(e.message ?? e));
            });
    });
});

server.listen(Number(opts.port), opts.host, () => {
    console.error(`llama_server: listening on http://${opts.host}:${opts.port}, loading ${opts.model}`);
});
load().catch((e) => {
    console.error(`llama_server: cannot load the model: ${e.stack ?? e}`);
    process.exit(1);
});
