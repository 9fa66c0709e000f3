// Finding and loading the real backend library that standin interposes.
//
// Note [real library]
// The real library is opened RTLD_NOW | RTLD_LOCAL and never closed (ggml never
// unloads backends either). Its registry pointer stays inside interpose/; the
// caller only ever sees standin's wrappers (Note [object ownership]).
#pragma once

#include <string>

struct ggml_backend_reg;

namespace standin::interpose {

enum class LoadError {
    none,
    not_found,          // no path configured or found, or the file does not exist
    dlopen_failed,      // the dynamic loader refused it (dlerror text in `detail`)
    missing_symbol,     // not a ggml backend: no ggml_backend_init
    api_version,        // ggml_backend_init returned a reg of another API version
    init_returned_null, // ggml_backend_init returned NULL
    declined,           // ggml_backend_score returned 0 (not supported on this machine)
    init_crashed,       // ggml_backend_init raised a fatal signal (reported, then the process dies)
    is_standin,         // the file is this module, or another standin build (Note [standin as the real library])
    bad_elf,            // not an ELF file, or a damaged one (truncated: parts lie past its end)
    dlopen_crashed,     // the dynamic loader or the library's constructors raised a fatal signal (reported, then death)
    no_devices,         // the registry offers no device: nothing to interpose
};

const char * load_error_name(LoadError e);

struct RealLibrary {
    LoadError          error = LoadError::not_found;
    std::string        path;
    std::string        detail;   // human-readable cause
    ggml_backend_reg * reg = nullptr;
    void *             handle = nullptr;
    // How the real library was reached, for reports: "interposed" (path or
    // replace mode: standin opened it) or "preload" (the application is linked
    // to it and standin was LD_PRELOADed over it; interpose/preload.h).
    const char *       mode = "interposed";
    bool ok() const { return error == LoadError::none; }
};

// Where the real library is, in this order: GGML_STANDIN_REAL; in replace mode
// (this module is installed as libggml-<name>-standin.so) the best-scoring
// libggml-<name>-*.so or libggml-<name>.so beside it. Empty when none applies.
std::string locate_real_library(const std::string & configured, std::string & why);

// Note [standin as the real library]
// GGML_STANDIN_REAL may name this module itself, or a copy of it. Calling its
// ggml_backend_init would re-enter standin's own registry while it is being
// built: the same file deadlocks on the registry's once-flag, a copy reads the
// same variable and opens itself. So a standin build is recognised before its
// init runs: by the file's identity (device and inode of this module) before
// dlopen, and by kStandinMarker, a symbol only standin exports, after it.

// The symbol every standin module exports and no other library does.
inline constexpr const char * kStandinMarker = "ggml_standin_module_marker";

// Checks that `path` is a well-formed ELF file of this process's class: its
// header, program headers, segments and sections lie inside the file. A
// truncated library passes dlopen's own checks, then dies of SIGBUS when its
// missing pages are touched; this catches it first. false with `why` set.
bool check_elf_file(const std::string & path, std::string & why);

// Opens and initialises a real library. Never throws; a damaged file
// (bad_elf) and a standin build (is_standin) are refused before anything of
// them runs; a crash inside dlopen or the real ggml_backend_init is reported
// (dlopen_crashed, init_crashed) before the process dies with the original signal.
RealLibrary load_real_library(const std::string & path);

// The handle of the real library whose ggml_backend_init this thread is
// running inside load_real_library, else nullptr. Preload mode uses it to
// send that library's (tail-)call of its own registration function back to it.
void * initialising_handle();

// Preload mode: takes the registry of a real library the application is linked
// to, through the real registration function `fn` (found by the caller with
// dlsym(RTLD_NEXT)), with the same checks and crash guard as load_real_library.
// `symbol` names it in reports. handle stays null: standin did not open it.
using RegFn = ggml_backend_reg * (*)();
RealLibrary adopt_linked_library(RegFn fn, const char * symbol);

// In replace mode: the score to report so ggml's loader picks this module over
// the real variants beside it (their best score + 1), or -1 when not in replace mode.
int replace_mode_score();

// The path of this module (dladdr), for replace-mode discovery and diagnostics.
std::string self_path();

} // namespace standin::interpose
