#include "interpose/loader.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "ggml-backend-impl.h"

namespace standin::interpose {

namespace fs = std::filesystem;

const char * load_error_name(LoadError e) {
    switch (e) {
        case LoadError::none:               return "none";
        case LoadError::not_found:          return "not_found";
        case LoadError::dlopen_failed:      return "dlopen_failed";
        case LoadError::missing_symbol:     return "missing_symbol";
        case LoadError::api_version:        return "api_version_mismatch";
        case LoadError::init_returned_null: return "init_returned_null";
        case LoadError::declined:           return "declined_by_score";
        case LoadError::init_crashed:       return "init_crashed";
    }
    return "?";
}

std::string self_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&self_path), &info) != 0 && info.dli_fname != nullptr) {
        return info.dli_fname;
    }
    return {};
}

namespace {

// "libggml-cpu-standin.so" -> "cpu"; "" when this module is not a replacement.
std::string replaced_backend_name() {
    const std::string file = fs::path(self_path()).filename().string();
    const std::string pre = "libggml-", post = "-standin.so";
    if (file.size() <= pre.size() + post.size() || file.compare(0, pre.size(), pre) != 0 ||
        file.compare(file.size() - post.size(), post.size(), post) != 0) {
        return {};
    }
    return file.substr(pre.size(), file.size() - pre.size() - post.size());
}

// Score of a candidate, opened the way ggml's loader does (RTLD_LOCAL). A
// library without ggml_backend_score counts as 1, as ggml's plain fallback does.
int candidate_score(const fs::path & p) {
    void * h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
        return 0;
    }
    auto fn = reinterpret_cast<int (*)()>(dlsym(h, "ggml_backend_score"));
    return fn != nullptr ? fn() : 1;
}

struct Candidate {
    fs::path path;
    int      score = 0;
};

// The real libraries beside this module in replace mode, best first.
Candidate best_beside_self(const std::string & name) {
    Candidate best;
    const fs::path self = fs::path(self_path());
    std::error_code ec;
    const std::string prefix = "libggml-" + name + "-";
    for (const auto & entry : fs::directory_iterator(self.parent_path(), ec)) {
        const std::string f = entry.path().filename().string();
        if (entry.path() == self || f.rfind(prefix, 0) != 0 || entry.path().extension() != ".so" ||
            f.find("-standin") != std::string::npos) {
            continue;
        }
        int s = candidate_score(entry.path());
        if (s > best.score) {
            best = {entry.path(), s};
        }
    }
    if (best.score == 0) {
        fs::path plain = self.parent_path() / ("libggml-" + name + ".so");
        if (fs::exists(plain, ec)) {
            best = {plain, 1};
        }
    }
    return best;
}

// --- the crash guard around the real ggml_backend_init --------------------------

thread_local void * t_initialising = nullptr;  // handle whose ggml_backend_init runs now

const char *     g_guarded_path = nullptr;
struct sigaction g_prev[32];
const int        kGuarded[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void write_str(const char * s) { (void) !write(STDERR_FILENO, s, strlen(s)); }

// Async-signal-safe: only write(2), then the previous disposition runs.
void on_init_crash(int sig) {
    write_str("standin: the real library crashed inside ggml_backend_init (init_crashed): ");
    write_str(g_guarded_path != nullptr ? g_guarded_path : "?");
    write_str(sig == SIGABRT ? " (SIGABRT)\n" : sig == SIGSEGV ? " (SIGSEGV)\n" : " (fatal signal)\n");
    sigaction(sig, &g_prev[sig], nullptr);
    raise(sig);
}

class InitCrashGuard {
public:
    explicit InitCrashGuard(const char * path) {
        g_guarded_path = path;
        struct sigaction sa {};
        sa.sa_handler = on_init_crash;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        for (int s : kGuarded) sigaction(s, &sa, &g_prev[s]);
    }
    ~InitCrashGuard() {
        for (int s : kGuarded) sigaction(s, &g_prev[s], nullptr);
        g_guarded_path = nullptr;
    }
};

} // namespace

std::string locate_real_library(const std::string & configured, std::string & why) {
    if (!configured.empty()) {
        why = "GGML_STANDIN_REAL";
        return configured;
    }
    const std::string name = replaced_backend_name();
    if (name.empty()) {
        why = "no GGML_STANDIN_REAL and not installed as libggml-<name>-standin.so";
        return {};
    }
    Candidate c = best_beside_self(name);
    if (c.path.empty()) {
        why = "replace mode for '" + name + "' but no libggml-" + name + "[-*].so beside " + self_path();
        return {};
    }
    why = "best-scoring libggml-" + name + " beside " + fs::path(self_path()).filename().string() + ", score " +
          std::to_string(c.score);
    return c.path.string();
}

int replace_mode_score() {
    const std::string name = replaced_backend_name();
    if (name.empty()) {
        return -1;
    }
    Candidate c = best_beside_self(name);
    // With no real library beside us we still load (standalone fallback).
    return c.score + 1;
}

RealLibrary load_real_library(const std::string & path) {
    RealLibrary r;
    r.path = path;
    std::error_code ec;
    if (path.empty() || !fs::exists(path, ec)) {
        r.error  = LoadError::not_found;
        r.detail = path.empty() ? "no real library configured" : "no such file: " + path;
        return r;
    }
    dlerror();
    r.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (r.handle == nullptr) {
        const char * e = dlerror();
        r.error  = LoadError::dlopen_failed;
        r.detail = e != nullptr ? e : "dlopen failed";
        return r;
    }
    auto init  = reinterpret_cast<ggml_backend_init_t>(dlsym(r.handle, "ggml_backend_init"));
    auto score = reinterpret_cast<ggml_backend_score_t>(dlsym(r.handle, "ggml_backend_score"));
    if (init == nullptr) {
        r.error  = LoadError::missing_symbol;
        r.detail = "no ggml_backend_init in " + path + ": not a ggml backend library";
        return r;
    }
    if (score != nullptr && score() == 0) {
        r.error  = LoadError::declined;
        r.detail = path + " reports it is not supported on this machine (score 0)";
        return r;
    }
    ggml_backend_reg * reg = nullptr;
    {
        InitCrashGuard guard(path.c_str());
        t_initialising = r.handle;
        reg = init();
        t_initialising = nullptr;
    }
    if (reg == nullptr) {
        r.error  = LoadError::init_returned_null;
        r.detail = "ggml_backend_init of " + path + " returned NULL";
        return r;
    }
    if (reg->api_version != GGML_BACKEND_API_VERSION) {
        r.error  = LoadError::api_version;
        r.detail = "API version " + std::to_string(reg->api_version) + " in " + path + ", standin speaks " +
                   std::to_string(GGML_BACKEND_API_VERSION);
        return r;
    }
    r.reg   = reg;
    r.error = LoadError::none;
    return r;
}

void * initialising_handle() { return t_initialising; }

RealLibrary adopt_linked_library(RegFn fn, const char * symbol) {
    RealLibrary r;
    r.mode = "preload";
    Dl_info info{};
    r.path = dladdr(reinterpret_cast<void *>(fn), &info) != 0 && info.dli_fname != nullptr ? info.dli_fname : symbol;
    ggml_backend_reg * reg = nullptr;
    {
        InitCrashGuard guard(r.path.c_str());
        reg = fn();
    }
    if (reg == nullptr) {
        r.error  = LoadError::init_returned_null;
        r.detail = std::string(symbol) + " of " + r.path + " returned NULL";
        return r;
    }
    if (reg->api_version != GGML_BACKEND_API_VERSION) {
        r.error  = LoadError::api_version;
        r.detail = "API version " + std::to_string(reg->api_version) + " in " + r.path + ", standin speaks " +
                   std::to_string(GGML_BACKEND_API_VERSION);
        return r;
    }
    r.reg   = reg;
    r.error = LoadError::none;
    return r;
}

} // namespace standin::interpose
