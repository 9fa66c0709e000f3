// Unix-socket client of standind (see client.h).
#include "tools/swarm/client.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/swarm/proc.h"
#include "tools/swarm/protocol.h"

namespace standin::swarm {

namespace {

std::string sys_error(const std::string & what, int e) { return what + ": " + std::strerror(e); }

std::string seconds(int ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g s", ms / 1000.0);
    return buf;
}

// What the process at the other end is doing, for a timeout message: a
// stopped daemon (SIGSTOP, a debugger) is the usual reason for silence.
std::string peer_state(int fd) {
    ucred     cred{};
    socklen_t len = sizeof(cred);
    if (fd < 0 || ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0) {
        return "";
    }
    const std::vector<std::string> f  = proc_stat_fields(cred.pid);
    const char                     st = f.empty() || f[0].empty() ? '?' : f[0][0];
    const std::string pid = std::to_string(cred.pid);
    if (st == 'T' || st == 't') {
        return "; standind (pid " + pid + ") is stopped: resume it with `kill -CONT " + pid + "`";
    }
    return "; standind (pid " + pid + ") is running but busy or stuck";
}

} // namespace

Client::Client(const std::string & socket_path, int timeout_ms) : path_(socket_path) {
    sockaddr_un addr{};
    if (socket_path.size() >= sizeof(addr.sun_path)) {
        throw ClientError("socket path is too long for a Unix socket (" + std::to_string(socket_path.size()) +
                          " bytes, at most " + std::to_string(sizeof(addr.sun_path) - 1) + "): " + socket_path);
    }
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        throw ClientError(sys_error("socket", errno));
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    // Set first: a Unix socket's connect waits while the daemon's backlog is
    // full (a stopped daemon stops accepting), bounded by the send timeout.
    set_timeout_ms(timeout_ms);
    if (::connect(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        int e = errno;
        ::close(fd_);
        fd_ = -1;
        if (e == ENOENT || e == ECONNREFUSED) {
            throw ClientError("no standind is running at " + socket_path +
                              " (start it with `standind`, or point --socket / GGML_STANDIN_SWARM_SOCKET at it)");
        }
        if (e == EAGAIN || e == EWOULDBLOCK || e == EINPROGRESS) {
            throw ClientError("standind at " + socket_path + " did not accept the connection within " +
                              seconds(timeout_ms) + " (its queue is full: is it stopped or overloaded?)");
        }
        throw ClientError(sys_error("cannot connect to standind at " + socket_path, e));
    }
}

Client::~Client() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

void Client::set_timeout_ms(int ms) {
    timeout_ms_ = ms;
    timeval tv{};
    tv.tv_sec  = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void Client::send_raw(const std::string & bytes) {
    std::size_t off = 0;
    while (off < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            throw ClientError(sys_error("sending to standind at " + path_, n < 0 ? errno : EPIPE));
        }
        off += static_cast<std::size_t>(n);
    }
}

void Client::close_write() { ::shutdown(fd_, SHUT_WR); }

std::string Client::read_line() {
    for (;;) {
        std::size_t nl = buf_.find('\n');
        if (nl != std::string::npos) {
            std::string line = buf_.substr(0, nl);
            buf_.erase(0, nl + 1);
            return line;
        }
        char    chunk[65536];
        ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            throw ClientError("standind at " + path_ + " did not answer within " + seconds(timeout_ms_) +
                              peer_state(fd_));
        }
        if (n < 0) {
            throw ClientError(sys_error("reading from standind at " + path_, errno));
        }
        if (n == 0) {
            std::string rest;
            rest.swap(buf_);
            return rest;
        }
        buf_.append(chunk, static_cast<std::size_t>(n));
    }
}

nlohmann::json Client::call(const nlohmann::json & request,
                            const std::function<void(const nlohmann::json &)> & on_event) {
    std::string send_error;
    try {
        send_raw(to_line(request));
    } catch (const ClientError & e) {
        // The daemon may have answered and closed before reading (a refused
        // peer): its reply is still waiting to be read.
        send_error = e.what();
    }
    for (;;) {
        std::string line = read_line();
        if (line.empty()) {
            throw ClientError(!send_error.empty() ? send_error
                                                  : "standind at " + path_ + " closed the connection without a reply");
        }
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            throw ClientError("standind sent a line that is not a JSON object");
        }
        if (j.contains("ok")) {
            return j;
        }
        if (on_event) {
            on_event(j);
        }
    }
}

} // namespace standin::swarm
