// standind's own log: one line per event on stderr, with a UTC timestamp.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <ctime>

namespace standin::swarmd {

__attribute__((format(printf, 1, 2))) inline void dlog(const char * fmt, ...) {
    char      when[32];
    timespec  ts{};
    tm        t{};
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &t);
    std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &t);
    char    line[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "standind %s.%03ldZ %s\n", when, ts.tv_nsec / 1000000, line);
}

} // namespace standin::swarmd
