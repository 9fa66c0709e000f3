// The daemon's Unix socket: accepts clients of its own uid only (SO_PEERCRED),
// reads newline-delimited JSON requests of bounded size, and answers each one.
// A bad request gets an error reply and never takes the daemon down.
//
// Note [silent connections]
// A connection only takes a thread (at most max_clients at once) while one of
// its requests is being answered; between requests it waits in the accept
// loop's poll set, which costs a descriptor and no thread. So connections that
// say nothing cannot lock real clients out. A new connection must send a
// complete request within first_request_s (else it gets a `timeout` reply and
// is closed); one that has been served is closed after idle_timeout_s of
// silence. When more than max_waiting connections wait, the oldest is dropped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/standind/kinds.h"
#include "tools/standind/scheduler.h"
#include "tools/standind/store.h"

namespace standin::swarmd {

struct ServerOptions {
    std::string socket_path;
    std::size_t max_request = swarm::kMaxRequestBytes;
    int         max_clients = 64;       // requests answered at once (one thread each)
    double      first_request_s = 5;    // a new connection must send a request this soon
    int         idle_timeout_s = 120;   // a served client silent this long is dropped
    std::size_t max_waiting = 512;      // connections waiting for a request (Note [silent connections])
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
    // A connection between requests: the bytes read so far and when it is dropped.
    struct Conn {
        int         fd = -1;
        std::string buf;
        double      deadline = 0;
        bool        served = false;  // has had a request answered
        bool        eof = false;     // the client shut down its side
    };
    void accept_clients(std::vector<Conn> & waiting);
    // Reads what `c` sent; true when it holds a request (or must be answered and closed).
    bool read_ready(Conn & c);
    void start_request(Conn && c);
    void serve_conn(Conn c);
    void park(Conn && c);  // back to the poll set (or closed when stopping)
    void do_logs(const swarm::Request & r, const std::function<bool(const nlohmann::json &)> & send);
    nlohmann::json dispatch(const swarm::Request & r);

    Store &                 store_;
    Scheduler &             sched_;
    const Kinds &           kinds_;
    ServerOptions           opt_;
    int                     listen_fd_ = -1;
    std::mutex              mu_;
    std::condition_variable gone_;
    std::set<int>           clients_;   // connections a thread is answering now
    std::vector<Conn>       parked_;    // served connections handed back to the poll loop
    int                     park_pipe_[2] = {-1, -1};  // wakes the poll loop when one is parked
    bool                    serving_ = false;
    int                     threads_ = 0;
    bool                    bound_ = false;
};

} // namespace standin::swarmd
