// The subcommands of the `standin` tool. Each returns the process exit code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace standin::tools {

struct DevicesOptions {
    std::string plugin;
    bool        json = false;
};
int cmd_devices(const DevicesOptions & opt);

struct ProbeOptions {
    std::string plugin;
    std::string mode;          // "", standalone or interpose
    std::string device;        // empty: the first device
    std::string ggml_bin_dir;  // where ggml's CPU backend is, for the reference
    bool        json = false;
};
int cmd_probe(const ProbeOptions & opt);

struct GraphOptions {
    std::string plugin;
    std::string device = "STANDIN_HOST0";
    long        n      = 1 << 22;  // elements per tensor
    int         iters  = 20;
    int         threads = 0;       // 0 = backend default
    bool        json   = false;
};
int cmd_graph(const GraphOptions & opt);

// `matmul`: one MUL_MAT shape at several column counts on several devices,
// timed side by side and checked against the first (cmd_matmul.cpp).
struct MatmulOptions {
    std::string plugin;
    std::string devices = "STANDIN_HOST0";  // NAME,NAME,...: the first is the reference
    std::string type    = "q4_0";           // weight type as ggml names it
    int64_t     m = 4096, k = 14336;
    std::string n       = "1,2,4,8,16,32,64,128,512";
    int         rotate  = 4;                // independent products per graph (weights past the L2 cache)
    int         reps    = 20;
    double      max_nmse = 5e-4;            // exit 1 when the last device is further from the first
};
int cmd_matmul(const MatmulOptions & opt);

struct MakeModelOptions {
    std::string        shape = "tiny";  // a name of model::shape_names()
    std::string        type  = "f32";   // f32 | f16 | q8_0 | q4_0, or a llama-quantize type (q4_k_m, iq4_xs, ...)
    std::string        out;
    std::string        quantize_tool;   // empty: model::default_quantize_tool()
    std::string        vocab;           // empty: the pinned tree's ggml-vocab-llama-bpe.gguf
    unsigned long long seed    = 1;
    int                threads = 0;     // 0 = every available core
    bool               quiet   = false;
};
int cmd_make_model(const MakeModelOptions & opt);

struct LogitsOptions {
    std::string plugin;
    std::string model;
    std::string device = "STANDIN_HOST0";  // or "none": ggml-cpu only; or NAME,NAME,... (split across them)
    std::string split_mode = "layer";      // none | layer | tensor (llama's -sm)
    std::string rpc;                       // HOST:PORT[,...]: register these rpc-servers' devices first (RPC0, ...)
    std::string prompt = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,";
    int         n_tokens = 0;              // 0 = the prompt's tokens; else the prompt repeated or cut to N
    std::string out;
    std::string compare;
    double      max_nmse   = 1e-4;
    int         threads    = 0;            // 0 = every available core
    std::string flash_attn = "off";        // on | off | auto
    int         ubatch     = 0;            // tokens per graph (llama's n_ubatch); 0 = all in one; 1 = decode token by token
    std::string cache_type_k = "f16";      // the K cache's type (llama's -ctk): a kCacheTypes name
    bool        verbose    = false;
};
int cmd_logits(const LogitsOptions & opt);
// The names --cache-type-k takes (ggml's type names of the types llama's -ctk takes).
std::vector<std::string> cache_types();

// `ab`: every node of a model's graph on a standin device and on a reference (cmd_ab.cpp).
struct AbOptions {
    std::string plugin;
    std::string model;
    std::string device    = "STANDIN_HOST0";
    std::string reference = "cpu";   // cpu | real (GGML_STANDIN_REAL's first GPU device)
    std::string prompt    = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away,";
    int         n_tokens  = 16;      // the prompt repeated or cut to N tokens
    int         max_nodes = 0;       // 0 = every node
    std::string ops;                 // OP,OP,...: only these (ggml_op_desc names); empty = all
    int         reps      = 3;       // timed runs per node and side (median)
    int         batch_mib = 1024;    // replay captured nodes in batches of about this much data
    int         threads   = 0;       // 0 = every available core, both sides
    std::string flash_attn = "off";  // on | off
    std::string csv;
    int         top       = 20;
    double      max_nmse  = -1;      // < 0: report only
    std::string expect_ops;          // OP,OP,...: exit 1 unless each was compared
    bool        progress  = true;
    bool        verbose   = false;
};
int cmd_ab(AbOptions opt);

// `rpc-server`: standin devices served over ggml-rpc, guarded so that no
// client's graph can take the server down (cmd_rpc_server.cpp).
struct RpcServerOptions {
    std::string              plugin;
    std::string              host = "127.0.0.1";
    int                      port = 50052;
    std::vector<std::string> devices{"STANDIN_HOST0"};
    int                      threads = 0;     // 0 = every core
    std::string              cache;           // ggml-rpc's tensor cache folder (empty: none)
    bool                     fallback = true; // nodes the device lacks run on ggml-cpu (host memory)
};
int cmd_rpc_server(const RpcServerOptions & opt);

// `swarm` has subcommands of its own (submit, ls, show, logs, cancel, retry,
// resume, completion): cmd_swarm.cpp registers them and runs the parsed one.
struct SwarmOptions {
    std::string              socket;              // empty: swarm::default_socket_path()
    std::int64_t             session = 0;
    int                      job     = 0;         // 0 = every job
    bool                     follow = false, json = false, ids = false, wait = false, wait_logs = false;
    std::string              state, name, file, shell;
    int                      limit   = 0;
    std::vector<std::string> jobs;                // submit --job specs
    std::string              kind    = "command"; // submit -- COMMAND...
    std::string              device  = "any";
    std::vector<std::string> command;
    double                   timeout = 0;
    double                   client_timeout = 15;  // seconds: connect and each wait for the daemon
};
CLI::App * add_swarm_command(CLI::App & app, SwarmOptions & opt);
int cmd_swarm(const CLI::App & swarm, const SwarmOptions & opt);

// `bench`: llama-bench over configurations x models x tests, interleaved;
// JSON/CSV/markdown/PNG report and an optional gate (cmd_bench.cpp).
struct BenchOptions {
    std::string              kind = "host";   // host | cuda
    std::string              device;          // STANDIN_HOST0 | STANDIN_CUDA0: sets kind
    std::vector<std::string> configs{"real", "standalone", "interposed-none", "interposed-all"};
    std::string              reference = "real";
    std::vector<std::string> models;
    std::vector<int>         n_prompt{512}, n_gen{128}, fa{0, 1};
    int                      reps = 3, threads = 0;
    std::vector<std::string> extra;           // more llama-bench arguments
    std::string              llama_bench, test_backend_ops, plugin, real;
    std::vector<std::string> ops;             // test-backend-ops perf per-op tables
    std::string              ops_filter;
    std::string              out, work, gate, from;
    double                   timeout = 1800;
    bool                     print_commands = false;
    std::string              container, engine = "podman";
    // Batched decode (llama-batched-bench): the sequence counts as given
    // (absent: none), tokens per sequence, the tool (default: beside llama-bench).
    std::optional<std::string> batched;
    int                        batched_npp = 128, batched_ntg = 32;
    std::string                llama_batched_bench;
};
CLI::App * add_bench_command(CLI::App & app, BenchOptions & opt);
int cmd_bench(const BenchOptions & opt);

} // namespace standin::tools
