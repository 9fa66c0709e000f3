// The subcommands of the `standin` tool. Each returns the process exit code.
#pragma once

#include <string>

namespace standin::tools {

struct DevicesOptions {
    std::string plugin;
    bool        json = false;
};
int cmd_devices(const DevicesOptions & opt);

struct GraphOptions {
    std::string plugin;
    std::string device = "STANDIN_HOST0";
    long        n      = 1 << 22;  // elements per tensor
    int         iters  = 20;
    int         threads = 0;       // 0 = backend default
    bool        json   = false;
};
int cmd_graph(const GraphOptions & opt);

} // namespace standin::tools
