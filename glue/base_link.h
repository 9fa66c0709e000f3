// Note [ggml-base binding]
// The plugin module does not list ggml-base among its NEEDED libraries and has
// no RUNPATH. Every ggml-base function it calls is a local trampoline
// (glue/base_link.cpp) that jumps through a slot filled, before any other
// work, from the ggml-base the process already has: the one the caller of the
// entry point resolves ggml's symbols to. So the plugin works under any
// soname the host gives ggml-base (npm's prebuilt libraries call it
// libggml-base.so, the pinned build libggml-base.so.0), never brings a second
// copy into the process, and loads when copied alone into another
// application's folder. The list of functions is glue/base_symbols.h; the
// module links with --no-undefined, so a ggml call missing from it fails the
// build. Tests and tools link ggml-base normally and never see this file.
#pragma once

#include <string>

namespace standin::glue {

// Fills the slots from the ggml-base that `caller` (an address inside the code
// that called the entry point) resolves to, or, when that gives none, from
// the one ggml-base loaded in the process. Idempotent and thread-safe; the
// first successful binding stays. false (with `why`) when no loaded object
// provides every function: the entry point must then refuse without calling
// into ggml.
bool bind_ggml_base(const void * caller, std::string * why);

// The file the slots were bound to ("" before binding).
const std::string & bound_ggml_base();

} // namespace standin::glue
