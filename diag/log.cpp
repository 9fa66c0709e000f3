#include "diag/log.h"

#include <cstdarg>
#include <cstdio>

#include "ggml.h"

// ggml-base exports this (declared in its internal ggml-impl.h, which we do not
// include: it drags in the whole private API). Its behaviour is the contract we
// want: route to the callback installed with ggml_log_set, stderr by default.
extern "C" void ggml_log_internal(enum ggml_log_level level, const char * format, ...);

namespace standin::diag {

static ggml_log_level to_ggml(Level level) {
    switch (level) {
        case Level::debug: return GGML_LOG_LEVEL_DEBUG;
        case Level::info:  return GGML_LOG_LEVEL_INFO;
        case Level::warn:  return GGML_LOG_LEVEL_WARN;
        case Level::error: return GGML_LOG_LEVEL_ERROR;
    }
    return GGML_LOG_LEVEL_INFO;
}

void log(Level level, const char * func, const char * fmt, ...) {
    char body[1024];
    va_list args;
    va_start(args, fmt);
    vsnprintf(body, sizeof(body), fmt, args);
    va_end(args);
    ggml_log_internal(to_ggml(level), "%s: %s\n", func, body);
}

} // namespace standin::diag
