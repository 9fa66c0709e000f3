// The client side of the swarm socket: connect, send one request, read its
// reply (and, for streaming requests, the events before it).
#pragma once

#include <functional>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace standin::swarm {

// A failure to reach or talk to the daemon (not an error reply: those come back as JSON).
struct ClientError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class Client {
  public:
    // Connects to the daemon's socket; throws ClientError with a message that says
    // what to do (e.g. no daemon is running). `timeout_ms` bounds the connect
    // and each wait for the daemon's next line; when it passes, the message
    // says so and whether the daemon is stopped.
    explicit Client(const std::string & socket_path, int timeout_ms = 30000);
    ~Client();
    Client(const Client &)             = delete;
    Client & operator=(const Client &) = delete;

    // Sends `request` and returns the reply (the first line with an "ok" field).
    // Lines before it (streamed events) go to `on_event` when given.
    nlohmann::json call(const nlohmann::json & request,
                        const std::function<void(const nlohmann::json &)> & on_event = nullptr);

    // Raw access for tests: send bytes, read one line ("" at end of stream).
    void        send_raw(const std::string & bytes);
    void        close_write();  // tells the daemon nothing more is coming
    std::string read_line();
    void        set_timeout_ms(int ms);

  private:
    int         fd_ = -1;
    int         timeout_ms_ = 0;
    std::string path_;
    std::string buf_;
};

} // namespace standin::swarm
