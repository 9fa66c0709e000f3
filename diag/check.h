// The three error tiers (README, "Errors come in three tiers" under Layout):
//   1. caller/environment errors: log a clear line and return nullptr/false/status
//      at the ABI. No macro here: the call site knows what to return.
//   2. internal invariants: SI_ASSERT, which goes to the crash path with the
//      statement, file and line. Never used for anything a caller can cause.
//   3. runtime-library calls: SI_CUDA_CHECK / SI_CUDA_CHECK_WARN
//      (runtime/cuda/cuda_device.h), in the runtime that owns the call.
#pragma once

namespace standin::diag {

// Reports the failed statement and aborts (the crash handler, when installed,
// adds the backtrace and the op being run). Never returns.
[[noreturn]] void fatal(const char * file, int line, const char * stmt, const char * detail);

} // namespace standin::diag

#define SI_ASSERT(cond)                                                       \
    do {                                                                      \
        if (!(cond)) ::standin::diag::fatal(__FILE__, __LINE__, #cond, "");   \
    } while (0)

#define SI_ASSERT_MSG(cond, msg)                                              \
    do {                                                                      \
        if (!(cond)) ::standin::diag::fatal(__FILE__, __LINE__, #cond, msg);  \
    } while (0)
