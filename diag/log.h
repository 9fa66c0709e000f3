// Logging through ggml's log callback, so standin's lines land wherever the host
// application sends ggml's (llama.cpp's --log-* flags, ggml_log_set).
//
// Every line is prefixed with the calling function, as the ecosystem does.
#pragma once

namespace standin::diag {

enum class Level { debug, info, warn, error };

// printf-style; never throws, never allocates on the heap for short lines.
void log(Level level, const char * func, const char * fmt, ...) __attribute__((format(printf, 3, 4)));

} // namespace standin::diag

#define SI_LOG_DEBUG(...) ::standin::diag::log(::standin::diag::Level::debug, __func__, __VA_ARGS__)
#define SI_LOG_INFO(...)  ::standin::diag::log(::standin::diag::Level::info,  __func__, __VA_ARGS__)
#define SI_LOG_WARN(...)  ::standin::diag::log(::standin::diag::Level::warn,  __func__, __VA_ARGS__)
#define SI_LOG_ERROR(...) ::standin::diag::log(::standin::diag::Level::error, __func__, __VA_ARGS__)
