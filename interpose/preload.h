// Preload mode: libggml-standin.so LD_PRELOADed over an application that is
// linked to a real backend (ggml built with GGML_BACKEND_DL=OFF, where
// libggml.so calls ggml_backend_cpu_reg() and friends directly).
//
// Note [preload mode]
// The module defines the registration functions of the backends it can stand
// in for (glue/preload_entry.cpp, one line each). Preloaded, those
// definitions come first in the global scope, so the application's call
// (from ggml's registry) reaches standin, which finds the real function with
// dlsym(RTLD_NEXT, name) on first use and returns the interposed registry
// built over the real one, exactly as path and replace mode do.
//
// Self-calls. A real library calls its own registration function too
// (ggml-cpu: ggml_backend_cpu_init and its extra buffer types read
// ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0)); built without
// -Bsymbolic, those calls go through the PLT and bind to standin's definition
// as well. The real library must only ever see its own objects, so the caller
// is identified by its return address: a call from inside a library that
// defines the symbol itself gets that library's own definition, unwrapped.
// This also covers a DL application with standin preloaded, whose dlopened
// backend modules would otherwise bind their self-calls to standin; their
// ggml_backend_init tail-calls the registration function (the return address
// is then ggml's loader), which is recognised by there being no definition
// in the global scope after standin: only the module's own one.
// Limitation: a tail call from a real library whose definition IS global
// (none in the pinned ggml-cpu, checked with objdump) would look like the
// application's call.
//
// Nothing happens before the first call: no static constructor, no touching of
// ggml's registry (it is a function-local static being built while it calls
// us; the module links ggml-base only and never calls into libggml).
#pragma once

#include "interpose/loader.h"

namespace standin::interpose::preload {

// Builds (once) or returns the process's registry over `real`; sets
// *built_for to the symbol preload mode built it for, or nullptr when another
// mode built it first (glue::registry_preloaded).
using BuildFn = ggml_backend_reg * (*)(RegFn real, const char * symbol, const char ** built_for);

// The exported registration function `symbol` was called; `self` is that
// exported definition, `return_address` where the call came from. Returns the
// registry that caller must see. Never throws.
ggml_backend_reg * entry(const char * symbol, RegFn self, const void * return_address, BuildFn build);

// The definition of `symbol` in the object that contains `address`, when that
// object defines it itself (not through a dependency), else nullptr.
void * own_definition(const void * address, const char * symbol);

// The definition of `symbol` in the one loaded object (other than standin)
// that defines it itself, or nullptr when none or several do.
void * only_local_definition(const char * symbol);

} // namespace standin::interpose::preload
