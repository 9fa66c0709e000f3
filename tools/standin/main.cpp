// standin: the command-line front end. Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>

#include "tools/standin/backends.h"
#include "tools/standin/commands.h"
#include "tools/standin/gguf_model.h"

int main(int argc, char ** argv) {
    using namespace standin::tools;
    CLI::App app{"standin: a stand-in ggml backend, and the tools around it"};
    app.require_subcommand(1);

    DevicesOptions dev_opt;
    auto * devices = app.add_subcommand("devices", "List standin's devices, memory, mode and buffer types");
    devices->add_option("--plugin", dev_opt.plugin, "Path to libggml-standin.so");
    devices->add_flag("--json", dev_opt.json, "Print JSON");

    ProbeOptions pr_opt;
    auto * probe = app.add_subcommand("probe", "Walk standin's boot sequence step by step; exit code names the failed step");
    probe->add_option("--plugin", pr_opt.plugin, "Path to libggml-standin.so");
    probe->add_option("--mode", pr_opt.mode, "standalone or interpose")->check(CLI::IsMember({"standalone", "interpose"}));
    probe->add_option("--device", pr_opt.device, "Device to probe (default: the first)");
    probe->add_flag("--json", pr_opt.json, "Print JSON");

    GraphOptions g_opt;
    auto * graph = app.add_subcommand("graph", "Run a small graph on a standin device and on ggml-cpu, side by side");
    graph->add_option("--plugin", g_opt.plugin, "Path to libggml-standin.so");
    graph->add_option("--device", g_opt.device, "standin device name")->capture_default_str();
    graph->add_option("--n", g_opt.n, "Elements per tensor (multiple of 1024)")->capture_default_str()
        ->check(CLI::PositiveNumber);
    graph->add_option("--iters", g_opt.iters, "Timed runs")->capture_default_str()->check(CLI::PositiveNumber);
    graph->add_option("--threads", g_opt.threads, "Threads for both devices (0 = their default)")
        ->check(CLI::NonNegativeNumber);
    graph->add_flag("--json", g_opt.json, "Print JSON");

    MatmulOptions mt_opt;
    auto * matmul = app.add_subcommand("matmul", "Time one MUL_MAT shape at several column counts on devices side by side");
    matmul->add_option("--plugin", mt_opt.plugin, "Path to libggml-standin.so");
    matmul->add_option("--devices", mt_opt.devices, "NAME,NAME,...; the first is the reference")->capture_default_str();
    matmul->add_option("--type", mt_opt.type, "Weight type (q4_0, q8_0, q4_K, f16, ...)")->capture_default_str();
    matmul->add_option("--m", mt_opt.m, "Weight rows")->capture_default_str()->check(CLI::PositiveNumber);
    matmul->add_option("--k", mt_opt.k, "Weight row length")->capture_default_str()->check(CLI::PositiveNumber);
    matmul->add_option("--n", mt_opt.n, "src1 columns, N,N,...")->capture_default_str();
    matmul->add_option("--rotate", mt_opt.rotate, "Independent products per graph")->capture_default_str()
        ->check(CLI::Range(1, 64));
    matmul->add_option("--reps", mt_opt.reps, "Timed runs (median)")->capture_default_str()->check(CLI::Range(1, 100000));
    matmul->add_option("--max-nmse", mt_opt.max_nmse, "Exit 1 when the last device is further than this from the first")
        ->capture_default_str();

    MakeModelOptions mm_opt;
    auto * make_model = app.add_subcommand("make-model", "Write a llama GGUF with random weights that llama.cpp can run");
    make_model->add_option("--shape", mm_opt.shape, model::shape_help())
        ->capture_default_str()->check(CLI::IsMember(model::shape_names()));
    make_model->add_option("--type", mm_opt.type,
                           "Weight type: f32, f16, q8_0 or q4_0 (written directly), or any type llama-quantize "
                           "takes (q4_k_m, q6_k, iq4_xs, mxfp4_moe, ...: an F16 model converted by it; "
                           "iq1_s, iq2_xxs, iq3_xxs ... with a uniform importance matrix)")
        ->capture_default_str();
    make_model->add_option("--quantize-tool", mm_opt.quantize_tool,
                           "llama-quantize for the other types (default: $STANDIN_LLAMA_BIN_DIR/llama-quantize, "
                           "else the pinned build's)");
    make_model->add_option("--out", mm_opt.out, "Output .gguf file")->required();
    make_model->add_option("--seed", mm_opt.seed, "Random seed")->capture_default_str();
    make_model->add_option("--vocab", mm_opt.vocab, "GGUF to copy the tokenizer.* keys from");
    make_model->add_option("--threads", mm_opt.threads, "Threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    make_model->add_flag("--quiet", mm_opt.quiet, "No progress output");

    LogitsOptions lg_opt;
    auto * logits = app.add_subcommand("logits", "Run a prompt through a model with libllama and keep every logit");
    logits->add_option("--plugin", lg_opt.plugin, "Path to libggml-standin.so");
    logits->add_option("--model", lg_opt.model, "GGUF model")->required();
    logits->add_option("--device", lg_opt.device, "Device(s) to offload all layers to (NAME or NAME,NAME,...), or none (CPU only)")
        ->capture_default_str();
    logits->add_option("--prompt", lg_opt.prompt, "Prompt text");
    logits->add_option("--n-tokens", lg_opt.n_tokens, "Tokens to evaluate (0 = the prompt's; else repeated/cut)")
        ->check(CLI::NonNegativeNumber);
    logits->add_option("--out", lg_opt.out, "Write the logits (float32, tokens x vocab) here");
    logits->add_option("--compare", lg_opt.compare, "Logits file of another run: print the NMSE against it");
    logits->add_option("--max-nmse", lg_opt.max_nmse, "Exit 1 when the NMSE is above this")->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    logits->add_option("--threads", lg_opt.threads, "Threads (0 = all cores)")->check(CLI::NonNegativeNumber);
    logits->add_option("--flash-attn", lg_opt.flash_attn, "on, off or auto")->capture_default_str()
        ->check(CLI::IsMember({"on", "off", "auto"}));
    logits->add_option("--ubatch", lg_opt.ubatch,
                       "Tokens per graph (0 = all in one; 1 = one token at a time: the decode kernels)")
        ->check(CLI::NonNegativeNumber);
    logits->add_option("--cache-type-k", lg_opt.cache_type_k,
                       "The K cache's type, as llama's -ctk (a quantized one without flash attention: KQ is then a "
                       "product of quantized rows)")
        ->capture_default_str()->check(CLI::IsMember(cache_types()));
    logits->add_option("--split-mode", lg_opt.split_mode, "How several devices share the model: none, layer or tensor")
        ->capture_default_str()->check(CLI::IsMember({"none", "layer", "tensor"}));
    logits->add_option("--rpc", lg_opt.rpc, "rpc-server endpoints HOST:PORT[,...]; their devices are RPC0, RPC1, ...");
    logits->add_flag("--verbose", lg_opt.verbose, "Show llama.cpp's log");

    AbOptions ab_opt;
    auto * ab = app.add_subcommand("ab", "Run every node of a model's graph on a standin device and on a reference; compare and time each");
    ab->add_option("--plugin", ab_opt.plugin, "Path to libggml-standin.so");
    ab->add_option("--model", ab_opt.model, "GGUF model")->required();
    ab->add_option("--device", ab_opt.device, "standin device")->capture_default_str();
    ab->add_option("--reference", ab_opt.reference, "cpu (ggml-cpu) or real (the library GGML_STANDIN_REAL names)")
        ->capture_default_str()->check(CLI::IsMember({"cpu", "real"}));
    ab->add_option("--prompt", ab_opt.prompt, "Prompt text");
    ab->add_option("--n-tokens", ab_opt.n_tokens, "Tokens in the batch (the prompt repeated or cut)")->capture_default_str()
        ->check(CLI::PositiveNumber);
    ab->add_option("--max-nodes", ab_opt.max_nodes, "Compare at most N nodes (0 = all)")->check(CLI::NonNegativeNumber);
    ab->add_option("--ops", ab_opt.ops, "Only these ops, OP,OP,... (e.g. MUL_MAT,SOFT_MAX,SWIGLU)");
    ab->add_option("--reps", ab_opt.reps, "Timed runs per node and side (median)")->capture_default_str()
        ->check(CLI::PositiveNumber);
    ab->add_option("--batch-mib", ab_opt.batch_mib, "Replay captured nodes in batches of about this many MiB")
        ->capture_default_str()->check(CLI::PositiveNumber);
    ab->add_option("--threads", ab_opt.threads, "Threads for both sides (0 = all cores)")->check(CLI::NonNegativeNumber);
    ab->add_option("--flash-attn", ab_opt.flash_attn, "on or off")->capture_default_str()
        ->check(CLI::IsMember({"on", "off"}));
    ab->add_option("--csv", ab_opt.csv, "Write every node's figures here");
    ab->add_option("--top", ab_opt.top, "Nodes in the worst-NMSE table")->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    ab->add_option("--max-nmse", ab_opt.max_nmse, "Exit 1 when a node's NMSE is above this");
    ab->add_option("--expect-ops", ab_opt.expect_ops, "Exit 1 unless each of OP,OP,... was compared");
    ab->add_flag("--verbose", ab_opt.verbose, "Show llama.cpp's log");

    RpcServerOptions rs_opt;
    auto * rpc_server = app.add_subcommand("rpc-server", "Serve standin devices over ggml-rpc; no client's graph can take the server down");
    rpc_server->add_option("--plugin", rs_opt.plugin, "Path to libggml-standin.so");
    rpc_server->add_option("-H,--host", rs_opt.host, "Address to listen on (the protocol has no authentication)")
        ->capture_default_str();
    rpc_server->add_option("-p,--port", rs_opt.port, "TCP port")->capture_default_str()->check(CLI::Range(1, 65535));
    rpc_server->add_option("-d,--device", rs_opt.devices, "Devices to serve, comma-separated")->delimiter(',')
        ->capture_default_str();
    rpc_server->add_option("-t,--threads", rs_opt.threads, "Threads per backend (0 = all cores)")
        ->check(CLI::NonNegativeNumber);
    rpc_server->add_option("-c,--cache", rs_opt.cache, "ggml-rpc's local tensor cache folder");
    rpc_server->add_flag("!--no-fallback", rs_opt.fallback, "Nodes the device lacks end the client's connection "
                                                           "instead of running on ggml-cpu");

    SwarmOptions sw_opt;
    auto * swarm = add_swarm_command(app, sw_opt);

    BenchOptions bn_opt;
    auto * bench = add_bench_command(app, bn_opt);

    CLI11_PARSE(app, argc, argv);

    if (dev_opt.plugin.empty()) dev_opt.plugin = default_plugin_path();
    if (g_opt.plugin.empty()) g_opt.plugin = default_plugin_path();
    if (lg_opt.plugin.empty()) lg_opt.plugin = default_plugin_path();
    if (pr_opt.plugin.empty()) pr_opt.plugin = default_plugin_path();
    if (pr_opt.ggml_bin_dir.empty()) pr_opt.ggml_bin_dir = STANDIN_GGML_BIN_DIR;
    if (*probe) return cmd_probe(pr_opt);
    if (*devices) return cmd_devices(dev_opt);
    if (*graph) return cmd_graph(g_opt);
    if (*make_model) return cmd_make_model(mm_opt);
    if (*matmul) {
        if (mt_opt.plugin.empty()) mt_opt.plugin = default_plugin_path();
        return cmd_matmul(mt_opt);
    }
    if (*logits) return cmd_logits(lg_opt);
    if (*ab) {
        if (ab_opt.plugin.empty()) ab_opt.plugin = default_plugin_path();
        return cmd_ab(ab_opt);
    }
    if (*swarm) return cmd_swarm(*swarm, sw_opt);
    if (*rpc_server) {
        if (rs_opt.plugin.empty()) rs_opt.plugin = default_plugin_path();
        return cmd_rpc_server(rs_opt);
    }
    if (*bench) return cmd_bench(bn_opt);
    return 2;
}
