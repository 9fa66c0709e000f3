// Reading /proc of processes that may end meanwhile (see proc.h).
#include "tools/swarm/proc.h"

#include <cerrno>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

namespace standin::swarm {

std::string read_all_or_empty(int fd) {
    std::string out;
    char        buf[4096];
    for (;;) {
        ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n > 0) {
            out.append(buf, static_cast<std::size_t>(n));
        } else if (n == 0) {
            return out;
        } else if (errno != EINTR) {
            return {};  // ESRCH: the process ended after the open
        }
    }
}

std::string proc_file(long pid, const char * name) {
    const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
    int               fd   = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return {};
    }
    std::string s = read_all_or_empty(fd);
    ::close(fd);
    return s;
}

std::vector<std::string> proc_stat_fields(long pid) {
    const std::string        s  = proc_file(pid, "stat");
    const std::size_t        rp = s.rfind(')');
    std::vector<std::string> out;
    if (rp == std::string::npos) {
        return out;
    }
    std::istringstream rest(s.substr(rp + 1));
    for (std::string f; rest >> f;) {
        out.push_back(f);
    }
    return out;
}

} // namespace standin::swarm
