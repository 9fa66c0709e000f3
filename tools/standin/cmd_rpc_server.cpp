// `standin rpc-server`: serves standin devices to ggml-rpc clients through
// ggml-rpc's own server (ggml_backend_rpc_start_server), each device guarded
// (Note [rpc guard] in glue/rpc_guard.h) so that no client's graph can take the
// server down: nodes the device lacks run on ggml-cpu when the data is in host
// memory; a graph that cannot run ends that client's connection only.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ggml-backend.h"
#include "glue/rpc_guard.h"
#include "tools/standin/backends.h"
#include "tools/standin/commands.h"

namespace standin::tools {

namespace {

// The server's connection to its client: a connected TCP socket of this
// process whose local port is the server's. ggml-rpc serves one client at a
// time, so that is the client whose graph was refused.
int port_of(int fd, bool & connected_tcp) {
    int       type = 0, listening = 0;
    socklen_t len  = sizeof(type);
    connected_tcp  = false;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return -1;
    len = sizeof(listening);
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || listening != 0) return -1;
    sockaddr_storage addr{};
    len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) return -1;
    if (addr.ss_family == AF_INET) {
        connected_tcp = true;
        return ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
    }
    if (addr.ss_family == AF_INET6) {
        connected_tcp = true;
        return ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
    }
    return -1;
}

// Ends the current client's connection; the server then reads end of stream,
// frees that client's buffers and accepts the next one. Returns how many.
int end_client_connections(int port) {
    int   n = 0;
    DIR * d = ::opendir("/proc/self/fd");
    if (d == nullptr) return 0;
    std::vector<int> fds;
    while (dirent * e = ::readdir(d)) {
        char * end = nullptr;
        long   fd  = std::strtol(e->d_name, &end, 10);
        if (end != e->d_name && *end == '\0' && fd != ::dirfd(d)) fds.push_back(static_cast<int>(fd));
    }
    ::closedir(d);
    for (int fd : fds) {
        bool tcp = false;
        if (port_of(fd, tcp) == port && tcp && ::shutdown(fd, SHUT_RDWR) == 0) ++n;
    }
    return n;
}

bool is_loopback(const std::string & host) { return host == "127.0.0.1" || host == "localhost" || host == "::1"; }

} // namespace

int cmd_rpc_server(const RpcServerOptions & o) {
    // A client that goes away mid-reply (or whose connection was ended above)
    // must cost the server a failed send, not the process: SIGPIPE would end it.
    std::signal(SIGPIPE, SIG_IGN);
    Loaded l = load_backends(o.plugin, true);  // also ggml-cpu and ggml-rpc, from the pinned build
    if (l.standin == nullptr) {
        std::fprintf(stderr, "standin rpc-server: %s\n", l.error.c_str());
        return 2;
    }
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    using start_fn = void (*)(const char *, const char *, size_t, size_t, ggml_backend_dev_t *);
    auto start = rpc != nullptr ? reinterpret_cast<start_fn>(ggml_backend_reg_get_proc_address(rpc, "ggml_backend_rpc_start_server"))
                                : nullptr;
    if (start == nullptr) {
        std::fprintf(stderr, "standin rpc-server: ggml-rpc is not loaded (libggml-rpc.so beside ggml-cpu; scripts/setup-deps builds it)\n");
        return 2;
    }
    ggml_backend_dev_t cpu = o.fallback ? ggml_backend_dev_by_name("CPU") : nullptr;
    if (o.fallback && cpu == nullptr) {
        std::fprintf(stderr, "standin rpc-server: ggml-cpu is not loaded: nodes the device lacks will end the client's connection\n");
    }
    const int        port = o.port;
    rpc::GuardOptions guard;
    guard.fallback   = cpu;
    guard.on_failure = [port](const std::string & why) {
        int n = end_client_connections(port);
        std::fprintf(stderr, "standin rpc-server: refused a client's graph: %s; %s (the server goes on)\n", why.c_str(),
                     n > 0 ? "closed its connection" : "found no client connection to close");
        std::fflush(stderr);
    };
    std::vector<ggml_backend_dev_t> devices;
    for (const std::string & name : o.devices) {
        ggml_backend_dev_t dev = ggml_backend_dev_by_name(name.c_str());
        if (dev == nullptr) {
            std::string known;
            for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
                known += (known.empty() ? "" : ", ") + std::string(ggml_backend_dev_name(ggml_backend_dev_get(i)));
            }
            std::fprintf(stderr, "standin rpc-server: no device %s (devices: %s)\n", name.c_str(), known.c_str());
            return 2;
        }
        devices.push_back(rpc::make_guarded_device(dev, guard));
    }
    if (!is_loopback(o.host)) {
        std::fprintf(stderr, "standin rpc-server: WARNING: serving on %s: the RPC protocol has no authentication; "
                             "anyone who can reach the port can use the devices\n", o.host.c_str());
    }
    const std::string endpoint = o.host + ":" + std::to_string(o.port);
    const size_t threads = o.threads > 0 ? static_cast<size_t>(o.threads) : std::max(1u, std::thread::hardware_concurrency());
    std::fflush(stdout);
    start(endpoint.c_str(), o.cache.empty() ? nullptr : o.cache.c_str(), threads, devices.size(), devices.data());
    std::fprintf(stderr, "standin rpc-server: the server stopped (see above: the port may be taken)\n");
    return 1;
}

} // namespace standin::tools
