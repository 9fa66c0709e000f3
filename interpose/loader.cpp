#include "interpose/loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "ggml-backend-impl.h"

// The marker of Note [standin as the real library]: exported from the module
// (built with hidden visibility) so that another standin can recognise it.
extern "C" __attribute__((visibility("default"), used)) const char ggml_standin_module_marker[] = "standin";

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
        case LoadError::is_standin:         return "is_standin";
        case LoadError::bad_elf:            return "bad_elf";
        case LoadError::dlopen_crashed:     return "dlopen_crashed";
        case LoadError::no_devices:         return "no_devices";
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

// --- the crash guard around dlopen and the real ggml_backend_init ---------------

thread_local void * t_initialising = nullptr;  // handle whose ggml_backend_init runs now

const char *     g_guarded_path  = nullptr;
const char *     g_guarded_stage = nullptr;  // the typed error the report names
struct sigaction g_prev[32];
const int        kGuarded[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};

void write_str(const char * s) { (void) !write(STDERR_FILENO, s, strlen(s)); }

// Async-signal-safe: only write(2), then the previous disposition runs.
void on_guarded_crash(int sig) {
    write_str("standin: the real library crashed ");
    write_str(g_guarded_stage != nullptr ? g_guarded_stage : "?");
    write_str(": ");
    write_str(g_guarded_path != nullptr ? g_guarded_path : "?");
    write_str(sig == SIGABRT ? " (SIGABRT)\n" : sig == SIGSEGV ? " (SIGSEGV)\n" : sig == SIGBUS ? " (SIGBUS)\n"
                                                                                           : " (fatal signal)\n");
    sigaction(sig, &g_prev[sig], nullptr);
    raise(sig);
}

class CrashGuard {
public:
    // `stage` is a string literal: what the report says was running.
    CrashGuard(const char * path, const char * stage) {
        g_guarded_path  = path;
        g_guarded_stage = stage;
        struct sigaction sa {};
        sa.sa_handler = on_guarded_crash;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        for (int s : kGuarded) sigaction(s, &sa, &g_prev[s]);
    }
    ~CrashGuard() {
        for (int s : kGuarded) sigaction(s, &g_prev[s], nullptr);
        g_guarded_path  = nullptr;
        g_guarded_stage = nullptr;
    }
};

constexpr const char * kInitStage   = "inside ggml_backend_init (init_crashed)";
constexpr const char * kScoreStage  = "inside ggml_backend_score (init_crashed)";
constexpr const char * kDlopenStage = "while the dynamic loader opened it (dlopen_crashed)";

// dlopen as ggml's loader does it (RTLD_LOCAL), with the crash guard: the
// library's constructors run in there.
void * guarded_dlopen(const char * path) {
    CrashGuard guard(path, kDlopenStage);
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

// The same file as this module (a hard or symbolic link counts too).
bool is_this_module(const std::string & path) {
    struct stat a {}, b {};
    const std::string self = self_path();
    return !self.empty() && ::stat(path.c_str(), &a) == 0 && ::stat(self.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

// True when the object behind `handle` itself defines kStandinMarker (not one
// of its dependencies, which dlsym also searches).
bool exports_marker(void * handle) {
    void * sym = dlsym(handle, kStandinMarker);
    if (sym == nullptr) {
        return false;
    }
    Dl_info    info{};
    link_map * map = nullptr;
    if (dladdr(sym, &info) == 0 || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) {
        return true;  // cannot tell whose it is: a standin is in the way either way
    }
    return info.dli_fbase == reinterpret_cast<void *>(map->l_addr) ||
           (info.dli_fname != nullptr && map->l_name != nullptr && std::strcmp(info.dli_fname, map->l_name) == 0);
}

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
// A damaged file or another standin build scores 0: it is never opened, or
// its code never runs (Note [standin as the real library]).
int candidate_score(const fs::path & p) {
    std::string why;
    if (!check_elf_file(p.string(), why) || is_this_module(p.string())) {
        return 0;
    }
    void * h = guarded_dlopen(p.c_str());
    if (h == nullptr || exports_marker(h)) {
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

namespace {

// True when [off, off + len) lies inside a file of `size` bytes (no overflow).
bool inside(std::uint64_t off, std::uint64_t len, std::uint64_t size) { return off <= size && len <= size - off; }

bool read_at(int fd, void * dst, std::size_t n, std::uint64_t off) {
    std::size_t got = 0;
    while (got < n) {
        ssize_t k = ::pread(fd, static_cast<char *>(dst) + got, n - got, static_cast<off_t>(off + got));
        if (k <= 0) {
            return false;
        }
        got += static_cast<std::size_t>(k);
    }
    return true;
}

std::string where(const char * what, std::size_t i, std::uint64_t end, std::uint64_t size) {
    return std::string(what) + " " + std::to_string(i) + " ends at byte " + std::to_string(end) + " of a " +
           std::to_string(size) + "-byte file (truncated or damaged)";
}

} // namespace

bool check_elf_file(const std::string & path, std::string & why) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        why = "cannot open " + path + ": " + std::strerror(errno);
        return false;
    }
    struct Closer { int fd; ~Closer() { ::close(fd); } } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        why = path + " is not a regular file";
        return false;
    }
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    Elf64_Ehdr eh{};
    if (!read_at(fd, &eh, sizeof(eh), 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        why = path + " is not an ELF file";
        return false;
    }
    if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
        why = path + " is not a 64-bit ELF file";
        return false;
    }
    if (eh.e_type != ET_DYN) {
        why = path + " is not a shared library (ELF type " + std::to_string(eh.e_type) + ")";
        return false;
    }
    if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        !inside(eh.e_phoff, std::uint64_t(eh.e_phnum) * sizeof(Elf64_Phdr), size)) {
        why = path + ": its program header table lies outside the file (truncated or damaged)";
        return false;
    }
    std::vector<Elf64_Phdr> ph(eh.e_phnum);
    if (!read_at(fd, ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff)) {
        why = path + ": cannot read its program headers";
        return false;
    }
    for (std::size_t i = 0; i < ph.size(); ++i) {
        // Every byte a segment maps from the file must exist: a page past the
        // end is mapped all the same, and touching it raises SIGBUS.
        if (ph[i].p_filesz > 0 && !inside(ph[i].p_offset, ph[i].p_filesz, size)) {
            why = path + ": " + where("segment", i, ph[i].p_offset + ph[i].p_filesz, size);
            return false;
        }
    }
    if (eh.e_shnum == 0) {
        return true;  // no section headers (allowed: the loader does not need them)
    }
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !inside(eh.e_shoff, std::uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr), size)) {
        why = path + ": its section header table lies outside the file (truncated or damaged)";
        return false;
    }
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (!read_at(fd, sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) {
        why = path + ": cannot read its section headers";
        return false;
    }
    for (std::size_t i = 0; i < sh.size(); ++i) {
        if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_size > 0 && !inside(sh[i].sh_offset, sh[i].sh_size, size)) {
            why = path + ": " + where("section", i, sh[i].sh_offset + sh[i].sh_size, size);
            return false;
        }
    }
    return true;
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
    if (is_this_module(path)) {
        r.error  = LoadError::is_standin;
        r.detail = path + " is this standin module itself, not a real backend";
        return r;
    }
    if (!check_elf_file(path, r.detail)) {
        r.error = LoadError::bad_elf;
        return r;
    }
    dlerror();
    r.handle = guarded_dlopen(path.c_str());
    if (r.handle == nullptr) {
        const char * e = dlerror();
        r.error  = LoadError::dlopen_failed;
        r.detail = e != nullptr ? e : "dlopen failed";
        return r;
    }
    if (exports_marker(r.handle)) {
        // Left open: its constructors ran, and a module is never unloaded (Note [real library]).
        r.error  = LoadError::is_standin;
        r.detail = path + " is a standin build, not a real backend";
        r.handle = nullptr;
        return r;
    }
    auto init  = reinterpret_cast<ggml_backend_init_t>(dlsym(r.handle, "ggml_backend_init"));
    auto score = reinterpret_cast<ggml_backend_score_t>(dlsym(r.handle, "ggml_backend_score"));
    if (init == nullptr) {
        r.error  = LoadError::missing_symbol;
        r.detail = "no ggml_backend_init in " + path + ": not a ggml backend library";
        return r;
    }
    int score_value = 1;
    if (score != nullptr) {
        CrashGuard guard(path.c_str(), kScoreStage);
        score_value = score();
    }
    if (score_value == 0) {
        r.error  = LoadError::declined;
        r.detail = path + " reports it is not supported on this machine (score 0)";
        return r;
    }
    ggml_backend_reg * reg = nullptr;
    {
        CrashGuard guard(path.c_str(), kInitStage);
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
    if (reg->iface.get_device_count == nullptr || reg->iface.get_device_count(reg) == 0) {
        r.error  = LoadError::no_devices;
        r.detail = path + " offers no devices (" + (reg->iface.get_name != nullptr ? reg->iface.get_name(reg) : "?") +
                   " registry); nothing to interpose";
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
        CrashGuard guard(r.path.c_str(), kInitStage);
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
