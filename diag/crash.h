// The crash handler (GGML_STANDIN_CRASH_HANDLER=1; always on in `standin probe`).
//
// On SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT it prints what standin was
// doing (op, node index, device, mode) with write(2) only, then a symbolized
// backtrace (backward-cpp over libdw: best effort, it allocates), then hands
// the signal to the handler that was installed before ours, so the host
// application's own crash handling still runs.
#pragma once

namespace standin::diag {

void install_crash_handler(const char * mode);
bool crash_handler_installed();

// What standin is doing right now, for the report. Plain globals written with
// relaxed stores: the handler must not touch TLS or locks.
struct CrashContext {
    const char * device = nullptr;
    const char * op     = nullptr;
    const char * stage  = nullptr;  // e.g. "graph_compute", "interposed graph_compute"
    int          node   = -1;
};

// Marks the node being dispatched (cheap: four stores). Cleared by crash_context_clear().
void crash_context_node(const char * stage, const char * device, const char * op, int node);
void crash_context_clear();

} // namespace standin::diag
