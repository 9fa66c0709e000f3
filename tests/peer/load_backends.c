// Preloaded into llama.cpp's test-llama-archs (tests/peer/archs_tests.cmake).
// In a GGML_BACKEND_DL build that test loads no backend module itself, so it
// would see no device at all; loading them before main (ggml-cpu from the
// tool's folder, standin through GGML_BACKEND_PATH) makes every device a row
// of its table. Linked to the tool's own libggml, so its constructors have run
// first.
#include "ggml-backend.h"

__attribute__((constructor)) static void standin_load_backends(void) { ggml_backend_load_all(); }
