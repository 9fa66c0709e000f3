// The daemon's socket and request handling (see server.h).
#include "tools/standind/server.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/standind/dlog.h"

namespace standin::swarmd {

using nlohmann::json;
using swarm::Op;
using swarm::ProtocolError;

namespace {

json or_null(double t) { return t > 0 ? json(t) : json(nullptr); }

json session_json(const SessionRow & s) {
    int total = 0;
    for (const auto & [k, n] : s.counts) total += n;
    return json{{"id", s.id},           {"name", s.name},
                {"state", s.state},     {"cwd", s.cwd},
                {"summary", s.summary}, {"created_at", s.created_at},
                {"started_at", or_null(s.started_at)}, {"ended_at", or_null(s.ended_at)},
                {"jobs", s.counts},     {"total", total}};
}

// `argv` is the command line the job runs (ran) by the daemon's current kinds;
// each attempt's exact one is also the first line of its log.
json job_json(const JobRow & j, const Kinds & kinds) {
    json argv = nullptr;
    if (kinds.has(j.kind)) {
        argv = kinds.build(j.kind, j.args, j.env, j.worker.empty() ? j.device : j.worker).argv;
    }
    return json{{"job", j.idx},
                {"name", j.name},
                {"kind", j.kind},
                {"device", j.device},
                {"worker", j.worker},
                {"state", j.state},
                {"args", j.args},
                {"argv", argv},
                {"attempts", j.attempts},
                {"interruptions", j.interruptions},
                {"exit_code", j.exit_code ? json(*j.exit_code) : json(nullptr)},
                {"signal", j.signal ? json(*j.signal) : json(nullptr)},
                {"error", j.error},
                {"result", j.result},
                {"timeout_s", j.timeout_s},
                {"queued_at", or_null(j.queued_at)},
                {"started_at", or_null(j.started_at)},
                {"ended_at", or_null(j.ended_at)},
                {"plugin", j.plugin.empty() ? json(nullptr)
                                            : json{{"path", j.plugin}, {"sha256", j.plugin_sha256}}}};
}

bool session_final(const std::string & s) { return s == "done" || s == "failed" || s == "cancelled"; }

bool send_all(int fd, const std::string & s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        off += static_cast<std::size_t>(n);
    }
    return true;
}

} // namespace

Server::Server(Store & store, Scheduler & sched, const Kinds & kinds, ServerOptions opt)
    : store_(store), sched_(sched), kinds_(kinds), opt_(std::move(opt)) {}

Server::~Server() {
    shutdown();
    if (listen_fd_ >= 0) {
        ::close(listen_fd_);
    }
    for (int fd : park_pipe_) {
        if (fd >= 0) ::close(fd);
    }
    if (bound_) {
        ::unlink(opt_.socket_path.c_str());
    }
}

void Server::bind_socket() {
    sockaddr_un addr{};
    const std::string & path = opt_.socket_path;
    if (path.size() >= sizeof(addr.sun_path)) {
        throw std::runtime_error("socket path " + path + " is too long for a Unix socket (at most " +
                                 std::to_string(sizeof(addr.sun_path) - 1) + " bytes): use --socket");
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    struct stat st{};
    if (::lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            throw std::runtime_error(path + " exists and is not a socket; refusing to replace it");
        }
        int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool alive = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) == 0;
        if (probe >= 0) ::close(probe);
        if (alive) {
            throw std::runtime_error("another standind is already listening on " + path);
        }
        ::unlink(path.c_str());  // left by a daemon that died
    }
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) {
        throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    }
    mode_t old = ::umask(0177);  // the socket is born 0600: no window where others could connect
    int    rc  = ::bind(listen_fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
    int    e   = errno;
    ::umask(old);
    if (rc != 0) {
        throw std::runtime_error("cannot bind " + path + ": " + std::strerror(e));
    }
    bound_ = true;
    ::chmod(path.c_str(), 0600);
    if (::listen(listen_fd_, 128) != 0) {
        throw std::runtime_error("cannot listen on " + path + ": " + std::strerror(errno));
    }
}

namespace {

double mono_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// True when `buf` holds a complete line that is not blank (blank lines are keep-alives).
bool has_request(std::string & buf) {
    for (;;) {
        std::size_t nl = buf.find('\n');
        if (nl == std::string::npos) {
            return false;
        }
        if (buf.find_first_not_of(" \t\r", 0) < nl) {
            return true;
        }
        buf.erase(0, nl + 1);
    }
}

void close_conn(int fd) { ::close(fd); }

} // namespace

void Server::accept_clients(std::vector<Conn> & waiting) {
    for (int i = 0; i < 64; ++i) {  // a burst of connections, then back to the others
        int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);  // blocking: replies may be long (recv uses MSG_DONTWAIT)
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));  // do not spin
            }
            return;
        }
        timeval stv{10, 0};  // a client that stops reading cannot hold a thread forever
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof(stv));
        ucred     cred{};
        socklen_t len = sizeof(cred);
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
            dlog("refused a client of uid %u (pid %d): not the daemon's owner", cred.uid, cred.pid);
            send_all(fd, swarm::to_line(swarm::error_reply(swarm::err::denied,
                "standind belongs to uid " + std::to_string(::geteuid()) + "; requests from uid " +
                std::to_string(cred.uid) + " are refused")));
            close_conn(fd);
            continue;
        }
        if (waiting.size() >= opt_.max_waiting) {
            // The oldest waiter goes: a flood of silent connections cannot keep a new one out.
            send_all(waiting.front().fd, swarm::to_line(swarm::error_reply(swarm::err::busy,
                "too many connections waiting to send a request; this one was the oldest")));
            close_conn(waiting.front().fd);
            waiting.erase(waiting.begin());
        }
        Conn c;
        c.fd       = fd;
        c.deadline = mono_s() + opt_.first_request_s;
        waiting.push_back(std::move(c));
    }
}

bool Server::read_ready(Conn & c) {
    char chunk[65536];
    for (;;) {
        ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
        if (n > 0) {
            c.buf.append(chunk, static_cast<std::size_t>(n));
            if (c.buf.size() > opt_.max_request) {
                return true;  // answered with too_large
            }
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            c.eof = true;  // a last request without its newline still counts
        }
        break;
    }
    return has_request(c.buf) || c.eof;
}

void Server::serve(const std::atomic<bool> & stop, int wake_fd) {
    if (::pipe2(park_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    }
    ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
    {
        std::lock_guard<std::mutex> lk(mu_);
        serving_ = true;
    }
    std::vector<Conn>   waiting;
    std::vector<pollfd> pf;
    while (!stop) {
        pf.assign({{listen_fd_, POLLIN, 0}, {wake_fd, POLLIN, 0}, {park_pipe_[0], POLLIN, 0}});
        double now = mono_s(), next = now + 1.0;
        for (const Conn & c : waiting) {
            pf.push_back({c.fd, POLLIN, 0});
            next = std::min(next, c.deadline);
        }
        ::poll(pf.data(), pf.size(), std::max(0, static_cast<int>((next - now) * 1000) + 1));
        if (pf[2].revents & POLLIN) {
            char drain[256];
            while (::read(park_pipe_[0], drain, sizeof(drain)) > 0) {
            }
            std::lock_guard<std::mutex> lk(mu_);
            for (Conn & c : parked_) waiting.push_back(std::move(c));
            parked_.clear();
        }
        // The waiting connections first: the vector is rebuilt below.
        now = mono_s();
        std::vector<Conn> still;
        for (std::size_t i = 0; i < waiting.size(); ++i) {
            Conn &     c     = waiting[i];
            const bool polled = i + 3 < pf.size() && pf[i + 3].fd == c.fd;
            if (polled && (pf[i + 3].revents & (POLLIN | POLLHUP | POLLERR)) && read_ready(c)) {
                start_request(std::move(c));
            } else if (now >= c.deadline) {
                if (!c.served) {
                    char secs[32];
                    std::snprintf(secs, sizeof(secs), "%g", opt_.first_request_s);
                    send_all(c.fd, swarm::to_line(swarm::error_reply(swarm::err::timeout,
                        std::string("no complete request within ") + secs + " s of connecting; closing")));
                }
                close_conn(c.fd);
            } else {
                still.push_back(std::move(c));
            }
        }
        waiting.swap(still);
        if (pf[0].revents & POLLIN) {
            accept_clients(waiting);
        }
    }
    std::lock_guard<std::mutex> lk(mu_);
    serving_ = false;
    for (Conn & c : waiting) close_conn(c.fd);
    for (Conn & c : parked_) close_conn(c.fd);
    parked_.clear();
}

void Server::start_request(Conn && c) {
    std::lock_guard<std::mutex> lk(mu_);
    if (threads_ >= opt_.max_clients) {
        send_all(c.fd, swarm::to_line(swarm::error_reply(swarm::err::busy,
            std::to_string(opt_.max_clients) + " requests are being answered; try again")));
        close_conn(c.fd);
        return;
    }
    ++threads_;
    clients_.insert(c.fd);
    std::thread([this, conn = std::move(c)]() mutable { serve_conn(std::move(conn)); }).detach();
}

void Server::park(Conn && c) {
    std::lock_guard<std::mutex> lk(mu_);
    clients_.erase(c.fd);
    if (!serving_) {
        close_conn(c.fd);
    } else {
        c.served   = true;
        c.deadline = mono_s() + opt_.idle_timeout_s;
        parked_.push_back(std::move(c));
        ssize_t n = ::write(park_pipe_[1], "p", 1);
        (void) n;  // a full pipe already wakes the loop
    }
    --threads_;
    gone_.notify_all();
}

void Server::shutdown() {
    std::unique_lock<std::mutex> lk(mu_);
    for (int fd : clients_) {
        ::shutdown(fd, SHUT_RDWR);
    }
    gone_.wait_for(lk, std::chrono::seconds(10), [&] { return threads_ == 0; });
}

// Answers every request `c` holds, then hands it back to the poll loop (Note
// [silent connections]); it ends here at end of stream or on an oversized request.
void Server::serve_conn(Conn c) {
    auto send = [fd = c.fd](const json & j) { return send_all(fd, swarm::to_line(j)); };
    for (;;) {
        std::size_t nl;
        while ((nl = c.buf.find('\n')) != std::string::npos) {
            std::string line = c.buf.substr(0, nl);
            c.buf.erase(0, nl + 1);
            if (line.find_first_not_of(" \t\r") == std::string::npos) {
                continue;  // blank lines are keep-alives
            }
            handle_line(line, send);
        }
        if (c.buf.size() > opt_.max_request) {
            send(swarm::error_reply(swarm::err::too_large, "request longer than " +
                                    std::to_string(opt_.max_request) + " bytes; closing the connection"));
            break;
        }
        if (c.eof) {
            if (!c.buf.empty()) {
                handle_line(c.buf, send);
            }
            break;
        }
        if (!read_ready(c) && !c.eof) {
            park(std::move(c));
            return;
        }
    }
    std::lock_guard<std::mutex> lk(mu_);
    clients_.erase(c.fd);
    close_conn(c.fd);
    --threads_;
    gone_.notify_all();
}

void Server::handle_line(const std::string & line, const std::function<bool(const json &)> & send) {
    if (line.size() > opt_.max_request) {
        send(swarm::error_reply(swarm::err::too_large, "request longer than " + std::to_string(opt_.max_request) +
                                " bytes"));
        return;
    }
    try {
        swarm::Request r = swarm::parse_request(line);
        if (r.op == Op::logs) {
            do_logs(r, send);
            return;
        }
        send(dispatch(r));
    } catch (const ProtocolError & e) {
        send(swarm::error_reply(e.code, e.what()));
    } catch (const StoreError & e) {
        dlog("request failed: %s", e.what());
        std::string msg = e.what();
        if (e.code == swarm::err::disk_full) {
            msg = store_.full_message();
        } else if (e.code == swarm::err::db_busy) {
            msg = "the database " + store_.path() + " is locked by another process (" + msg +
                  "); nothing was changed, try again";
        }
        send(swarm::error_reply(e.code, msg));
    } catch (const std::exception & e) {
        dlog("request failed: %s", e.what());
        send(swarm::error_reply(swarm::err::internal, e.what()));
    }
}

json Server::dispatch(const swarm::Request & r) {
    json out = swarm::ok_reply();
    switch (r.op) {
        case Op::ping:
            out["version"] = swarm::kProtocolVersion;
            out["pid"]     = ::getpid();
            out["db"]      = store_.path();
            out["devices"] = sched_.devices();
            out["kinds"]   = kinds_.names();
            return out;
        case Op::submit: {
            swarm::SessionSpec spec = r.submit;
            sched_.check_submit(spec);
            out["session"] = store_.create_session(spec);
            out["jobs"]    = spec.jobs.size();
            sched_.wake();
            return out;
        }
        case Op::ls: {
            std::vector<SessionRow> rows = store_.list_sessions(r.state, r.limit);
            if (r.ids_only) {
                json ids = json::array();
                for (const SessionRow & s : rows) ids.push_back(s.id);
                out["ids"] = std::move(ids);
            } else {
                json list = json::array();
                for (const SessionRow & s : rows) list.push_back(session_json(s));
                out["sessions"] = std::move(list);
            }
            return out;
        }
        case Op::show: {
            std::optional<SessionRow> s = store_.get_session(r.session);
            if (!s) {
                throw ProtocolError(swarm::err::not_found, "no session " + std::to_string(r.session));
            }
            out["session"] = session_json(*s);
            json jobs = json::array();
            for (const JobRow & j : store_.get_jobs(r.session)) jobs.push_back(job_json(j, kinds_));
            out["session"]["job_list"] = std::move(jobs);
            return out;
        }
        case Op::cancel: out["running_stopped"] = sched_.cancel(r.session, r.job).size(); return out;
        case Op::retry:
        case Op::resume: {
            // retry: jobs that ran and failed; resume: jobs stopped from outside.
            std::vector<std::string> states = r.op == Op::retry ? std::vector<std::string>{"failed"}
                                                                : std::vector<std::string>{"interrupted", "cancelled"};
            int n = sched_.requeue(r.session, r.job, states);
            if (n == 0) {
                throw ProtocolError(swarm::err::bad_state, "session " + std::to_string(r.session) + " has no " +
                                    (r.op == Op::retry ? "failed" : "interrupted or cancelled") + " job" +
                                    (r.job ? " " + std::to_string(*r.job) : "") + " to " + swarm::op_name(r.op));
            }
            out["requeued"] = n;
            return out;
        }
        case Op::logs: break;
    }
    throw ProtocolError(swarm::err::internal, "unhandled op");
}

// Streams log lines as {"event": "log", ...}; with follow, until the session
// (or the job) has ended. The end state is read before the last drain, so
// every line committed before the end is sent.
void Server::do_logs(const swarm::Request & r, const std::function<bool(const json &)> & send) {
    std::int64_t after = r.after;
    int          quiet = 0;  // waits without news; a heartbeat every few finds a vanished client
    for (;;) {
        std::uint64_t             v = store_.version();
        std::optional<SessionRow> s = store_.get_session(r.session);
        if (!s) {
            throw ProtocolError(swarm::err::not_found, "no session " + std::to_string(r.session));
        }
        bool ended = session_final(s->state);
        if (r.job) {
            std::vector<JobRow> jobs = store_.get_jobs(r.session);
            if (*r.job > static_cast<int>(jobs.size())) {
                throw ProtocolError(swarm::err::not_found, "session " + std::to_string(r.session) +
                                    " has no job " + std::to_string(*r.job));
            }
            ended = swarm::job_state_is_final(jobs[static_cast<std::size_t>(*r.job - 1)].state);
        }
        for (;;) {
            std::vector<LogRow> rows = store_.get_logs(r.session, r.job, after, 1000);
            for (const LogRow & l : rows) {
                json e = {{"event", "log"},   {"id", l.id},         {"job", l.job}, {"attempt", l.attempt},
                          {"stream", l.stream}, {"ts", l.ts},       {"line", l.line}};
                if (!send(e)) {
                    return;  // the client went away
                }
                after = l.id;
            }
            if (rows.size() < 1000) {
                break;
            }
        }
        if (!r.follow || ended || sched_.stopping()) {
            json out = swarm::ok_reply();
            out["last"]  = after;
            out["state"] = s->state;
            send(out);
            return;
        }
        if (store_.wait_change(v, 1000) == v && ++quiet % 5 == 0 && !send(json{{"event", "heartbeat"}})) {
            return;
        }
    }
}

} // namespace standin::swarmd
