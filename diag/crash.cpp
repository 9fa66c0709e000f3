#include "diag/crash.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef STANDIN_HAVE_LIBDW
#define BACKWARD_HAS_DW 1
#endif
#include <backward.hpp>

namespace standin::diag {

namespace {

const int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

struct sigaction g_previous[NSIG];
std::atomic<bool> g_installed{false};
const char * g_mode = "?";

std::atomic<const char *> g_device{nullptr};
std::atomic<const char *> g_op{nullptr};
std::atomic<const char *> g_stage{nullptr};
std::atomic<int>          g_node{-1};

void put(const char * s) {
    if (s != nullptr) {
        (void) !write(STDERR_FILENO, s, strlen(s));
    }
}

void put_int(long v) {
    char buf[24];
    int i = sizeof(buf);
    const bool neg = v < 0;
    unsigned long u = neg ? 0UL - (unsigned long) v : (unsigned long) v;
    do {
        buf[--i] = char('0' + u % 10);
        u /= 10;
    } while (u != 0 && i > 1);
    if (neg) buf[--i] = '-';
    (void) !write(STDERR_FILENO, buf + i, sizeof(buf) - i);
}

const char * signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS:  return "SIGBUS";
        case SIGILL:  return "SIGILL";
        case SIGFPE:  return "SIGFPE";
        case SIGABRT: return "SIGABRT";
        default:      return "signal";
    }
}

// Hands the signal on: the previous handler if it was a function, else the
// default action (re-raised with our handler out of the way).
void chain(int sig, siginfo_t * info, void * uctx) {
    const struct sigaction & prev = g_previous[sig];
    sigaction(sig, &prev, nullptr);
    if ((prev.sa_flags & SA_SIGINFO) != 0 && prev.sa_sigaction != nullptr) {
        prev.sa_sigaction(sig, info, uctx);
    } else if (prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN && prev.sa_handler != nullptr) {
        prev.sa_handler(sig);
    }
    // If the previous handler returned (or there was none), die as the signal says.
    signal(sig, SIG_DFL);
    raise(sig);
}

std::atomic<bool> g_in_handler{false};

void on_fatal_signal(int sig, siginfo_t * info, void * uctx) {
    if (g_in_handler.exchange(true)) {
        // The symbolizer itself faulted: give up on frames, keep the chain.
        put("(backtrace unavailable: the symbolizer faulted)\n==== end of standin crash report ====\n");
        chain(sig, info, uctx);
        return;
    }
    // 1. Context, async-signal-safe.
    put("\n==== standin crash report ====\nsignal: ");
    put(signal_name(sig));
    put("\nmode: ");
    put(g_mode);
    const char * stage = g_stage.load(std::memory_order_relaxed);
    put("\nstage: ");
    put(stage != nullptr ? stage : "(not inside a standin dispatch)");
    if (stage != nullptr) {
        put("\ndevice: ");
        put(g_device.load(std::memory_order_relaxed));
        put("\nop: ");
        put(g_op.load(std::memory_order_relaxed));
        put("\nnode: ");
        put_int(g_node.load(std::memory_order_relaxed));
    }
    put("\nbacktrace:\n");
    // 2. Symbolized frames: best effort (allocates; the process is dying anyway).
    backward::StackTrace st;
    st.load_here(48);
    st.skip_n_firsts(2);
    backward::Printer printer;
    printer.snippet = false;
    printer.object  = true;
    printer.address = true;
    printer.color_mode = backward::ColorMode::never;
    printer.print(st, stderr);
    std::fflush(stderr);
    put("==== end of standin crash report ====\n");
    // 3. The host's own handling.
    chain(sig, info, uctx);
}

} // namespace

void install_crash_handler(const char * mode) {
    g_mode = mode != nullptr ? mode : "?";  // a later call only updates the mode
    if (g_installed.exchange(true)) {
        return;
    }
    // An alternate stack, so a stack overflow can still be reported.
    // Symbolizing through libdw needs a deep stack.
    static char alt_stack[4 << 20];
    stack_t ss{};
    ss.ss_sp    = alt_stack;
    ss.ss_size  = sizeof(alt_stack);
    ss.ss_flags = 0;
    sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (int s : kSignals) {
        sigaction(s, &sa, &g_previous[s]);
    }
}

bool crash_handler_installed() { return g_installed.load(); }

void crash_context_node(const char * stage, const char * device, const char * op, int node) {
    g_device.store(device, std::memory_order_relaxed);
    g_op.store(op, std::memory_order_relaxed);
    g_node.store(node, std::memory_order_relaxed);
    g_stage.store(stage, std::memory_order_relaxed);
}

void crash_context_clear() { g_stage.store(nullptr, std::memory_order_relaxed); }

} // namespace standin::diag
