// Unix-socket client of standind (see client.h).
#include "tools/swarm/client.h"

#include <cerrno>
#include <cstring>

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/swarm/protocol.h"

namespace standin::swarm {

namespace {

std::string sys_error(const std::string & what, int e) { return what + ": " + std::strerror(e); }

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
    if (::connect(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
        int e = errno;
        ::close(fd_);
        fd_ = -1;
        if (e == ENOENT || e == ECONNREFUSED) {
            throw ClientError("no standind is running at " + socket_path +
                              " (start it with `standind`, or point --socket / GGML_STANDIN_SWARM_SOCKET at it)");
        }
        throw ClientError(sys_error("cannot connect to standind at " + socket_path, e));
    }
    set_timeout_ms(timeout_ms);
}

Client::~Client() {
    if (fd_ >= 0) {
        ::close(fd_);
    }
}

void Client::set_timeout_ms(int ms) {
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
            throw ClientError("standind at " + path_ + " did not answer in time");
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
