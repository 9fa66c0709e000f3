// The daemon's Unix socket: accepts clients of its own uid only (SO_PEERCRED),
// reads newline-delimited JSON requests of bounded size, and answers each one.
// One thread per client, at most max_clients at once; a bad request gets an
// error reply and never takes the daemon down.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "tools/standind/kinds.h"
#include "tools/standind/scheduler.h"
#include "tools/standind/store.h"

namespace standin::swarmd {

struct ServerOptions {
    std::string socket_path;
    std::size_t max_request = swarm::kMaxRequestBytes;
    int         max_clients = 64;
    int         idle_timeout_s = 120;  // a client silent this long is dropped
};

class Server {
  public:
    Server(Store & store, Scheduler & sched, const Kinds & kinds, ServerOptions opt);
    ~Server();

    // Binds the socket (mode 0600). Refuses when another daemon answers on it;
    // removes a stale one. Throws std::runtime_error with a clear message.
    void bind_socket();
    // Accepts clients until `stop` is set; `wake_fd` becoming readable interrupts the wait.
    void serve(const std::atomic<bool> & stop, int wake_fd);
    // Disconnects every client and waits for their threads.
    void shutdown();

    // Handles one request line, writing replies through `send` (false: the client is gone).
    // Public so that the tests can drive it without a socket.
    void handle_line(const std::string & line, const std::function<bool(const nlohmann::json &)> & send);

  private:
    void client_thread(int fd);
    void do_logs(const swarm::Request & r, const std::function<bool(const nlohmann::json &)> & send);
    nlohmann::json dispatch(const swarm::Request & r);

    Store &                 store_;
    Scheduler &             sched_;
    const Kinds &           kinds_;
    ServerOptions           opt_;
    int                     listen_fd_ = -1;
    std::mutex              mu_;
    std::condition_variable gone_;
    std::set<int>           clients_;
    int                     threads_ = 0;
    bool                    bound_ = false;
};

} // namespace standin::swarmd
