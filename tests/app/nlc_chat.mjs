// One LlamaChatSession chat through node-llama-cpp's public API, as an
// application written against it does: getLlama, loadModel, createContext,
// LlamaChatSession.prompt. Nothing here knows about standin; the caller picks
// the mode through the environment (GGML_BACKEND_PATH) or the files beside
// the prebuilt libraries.
//
// Usage: node nlc_chat.mjs APP_DIR MODEL GPU_LAYERS [MAX_TOKENS [THREADS]]
//   APP_DIR     folder whose node_modules holds node-llama-cpp
//   GPU_LAYERS  a number, or "max"
//   MAX_TOKENS  the answer's length limit (16)
//   THREADS     the context's threads (2)
// Prints, on stdout:
//   gpu devices: DESC[,DESC...]   what node-llama-cpp reports as GPUs (or none)
//   gpu layers: N                 the layers it offloaded
//   text: "<json string>"         the answer
//   tokens: N in S s (X t/s)      tokens generated and the rate, from the first
//                                 token to the last (the prompt is not counted)
// llama.cpp's log lines (standin's among them) go to stderr, one per line,
// prefixed "[log LEVEL]".
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [appDir, modelPath, gpuLayersArg, maxTokensArg, threadsArg] = process.argv.slice(2);
if (!appDir || !modelPath || !gpuLayersArg) {
    console.error("usage: node nlc_chat.mjs APP_DIR MODEL GPU_LAYERS [MAX_TOKENS [THREADS]]");
    process.exit(2);
}
const gpuLayers = gpuLayersArg === "max" ? "max" : Number(gpuLayersArg);
const maxTokens = Number(maxTokensArg ?? 16);
const threads = Number(threadsArg ?? 2);

// The package as the application's own folder resolves it.
const resolved = createRequire(path.join(path.resolve(appDir), "package.json")).resolve("node-llama-cpp");
const { getLlama, LlamaChatSession, LlamaLogLevel } = await import(pathToFileURL(resolved).href);

const llama = await getLlama({
    gpu: false,          // the CPU-only prebuilt binary (@node-llama-cpp/linux-x64)
    build: "never",      // never compile or download anything
    logLevel: LlamaLogLevel.info,
    logger: (level, message) => {
        for (const line of String(message).split("\n")) {
            if (line.trim() !== "") process.stderr.write(`[log ${level}] ${line}\n`);
        }
    },
});

const model = await llama.loadModel({ modelPath, gpuLayers });
const context = await model.createContext({ contextSize: 256, threads });
console.log(`gpu devices: ${(await llama.getGpuDeviceNames()).join(",") || "none"}`);
console.log(`gpu layers: ${model.gpuLayers}`);

const session = new LlamaChatSession({ contextSequence: context.getSequence() });
let tokens = 0;
let first = 0;
let last = 0;
const text = await session.prompt("Name the capital of France.", {
    maxTokens,
    temperature: 0,
    onToken: (chunk) => {
        const now = performance.now();
        if (tokens === 0) first = now;
        last = now;
        tokens += chunk.length;
    },
});
const seconds = (last - first) / 1000;
// The first token ends the prompt's evaluation; the rate counts those after it.
const rate = tokens > 1 && seconds > 0 ? (tokens - 1) / seconds : 0;
console.log(`text: ${JSON.stringify(text)}`);
console.log(`tokens: ${tokens} in ${seconds.toFixed(3)} s (${rate.toFixed(1)} t/s)`);

await context.dispose();
await model.dispose();
await llama.dispose();
