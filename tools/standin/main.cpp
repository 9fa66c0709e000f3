// standin: the command-line front end. Subcommands live in cmd_*.cpp.
#include <CLI/CLI.hpp>

#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

int main(int argc, char ** argv) {
    using namespace standin::tools;
    CLI::App app{"standin: a stand-in ggml backend, and the tools around it"};
    app.require_subcommand(1);

    DevicesOptions dev_opt;
    auto * devices = app.add_subcommand("devices", "List standin's devices, memory, mode and buffer types");
    devices->add_option("--plugin", dev_opt.plugin, "Path to libggml-standin.so");
    devices->add_flag("--json", dev_opt.json, "Print JSON");

    GraphOptions g_opt;
    auto * graph = app.add_subcommand("graph", "Run a small graph on a standin device and on ggml-cpu, side by side");
    graph->add_option("--plugin", g_opt.plugin, "Path to libggml-standin.so");
    graph->add_option("--device", g_opt.device, "standin device name")->capture_default_str();
    graph->add_option("--n", g_opt.n, "Elements per tensor (multiple of 1024)")->capture_default_str();
    graph->add_option("--iters", g_opt.iters, "Timed runs")->capture_default_str();
    graph->add_option("--threads", g_opt.threads, "Threads for both devices (0 = their default)");
    graph->add_flag("--json", g_opt.json, "Print JSON");

    CLI11_PARSE(app, argc, argv);

    if (dev_opt.plugin.empty()) dev_opt.plugin = default_plugin_path();
    if (g_opt.plugin.empty()) g_opt.plugin = default_plugin_path();
    if (*devices) return cmd_devices(dev_opt);
    if (*graph) return cmd_graph(g_opt);
    return 2;
}
