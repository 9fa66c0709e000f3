#include "diag/check.h"

#include <cstdio>
#include <cstdlib>

#include "diag/log.h"

namespace standin::diag {

void fatal(const char * file, int line, const char * stmt, const char * detail) {
    // stderr directly as well as the log callback: the callback may be a
    // buffered sink that dies with the process.
    std::fprintf(stderr, "standin: internal error at %s:%d: %s %s\n", file, line, stmt, detail);
    std::fflush(stderr);
    std::abort();
}

} // namespace standin::diag
