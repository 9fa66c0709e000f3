# Locates the pinned llama.cpp tree and its build, as laid out by
# scripts/setup-deps (which writes deps.env). Pass -DSTANDIN_DEPS=<dir with
# deps.env>, or the two directories directly.
find_package(Threads REQUIRED)

if(STANDIN_DEPS AND EXISTS "${STANDIN_DEPS}/deps.env")
    file(STRINGS "${STANDIN_DEPS}/deps.env" _standin_env)
    foreach(_line IN LISTS _standin_env)
        if(_line MATCHES "^([A-Z_]+)=(.*)$")
            if(NOT ${CMAKE_MATCH_1})
                set(${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
            endif()
        endif()
    endforeach()
endif()

foreach(_var STANDIN_LLAMA_SRC_DIR STANDIN_LLAMA_BUILD_DIR)
    if(NOT ${_var})
        message(FATAL_ERROR "standin: ${_var} is not set. Run scripts/setup-deps and pass "
                            "-DSTANDIN_DEPS=<its output>, or set it directly.")
    endif()
endforeach()
if(NOT STANDIN_LLAMA_BIN_DIR)
    set(STANDIN_LLAMA_BIN_DIR "${STANDIN_LLAMA_BUILD_DIR}/bin")
endif()

set(STANDIN_GGML_PUBLIC_INCLUDE  "${STANDIN_LLAMA_SRC_DIR}/ggml/include")
set(STANDIN_GGML_PRIVATE_INCLUDE "${STANDIN_LLAMA_SRC_DIR}/ggml/src")
if(NOT EXISTS "${STANDIN_GGML_PRIVATE_INCLUDE}/ggml-backend-impl.h")
    message(FATAL_ERROR "standin: no ggml-backend-impl.h under ${STANDIN_GGML_PRIVATE_INCLUDE}")
endif()

add_library(ggml::headers INTERFACE IMPORTED GLOBAL)
set_target_properties(ggml::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${STANDIN_GGML_PUBLIC_INCLUDE}")

find_library(STANDIN_GGML_BASE_LIB NAMES ggml-base PATHS "${STANDIN_LLAMA_BIN_DIR}" NO_DEFAULT_PATH REQUIRED)
add_library(ggml::base SHARED IMPORTED GLOBAL)
set_target_properties(ggml::base PROPERTIES
    IMPORTED_LOCATION "${STANDIN_GGML_BASE_LIB}"
    INTERFACE_INCLUDE_DIRECTORIES "${STANDIN_GGML_PUBLIC_INCLUDE}")
message(STATUS "standin: ggml from ${STANDIN_LLAMA_SRC_DIR}, built in ${STANDIN_LLAMA_BUILD_DIR}")

# ggml built with the CPU backend linked in (GGML_BACKEND_DL=OFF; setup-deps
# step 2b), for the preload-mode tests. Optional: those tests are skipped without it.
if(STANDIN_LLAMA_LINKED_BIN_DIR AND NOT EXISTS "${STANDIN_LLAMA_LINKED_BIN_DIR}/libggml-cpu.so")
    message(STATUS "standin: no linked ggml in ${STANDIN_LLAMA_LINKED_BIN_DIR}: preload-mode tests skipped")
    unset(STANDIN_LLAMA_LINKED_BIN_DIR)
endif()

# node-llama-cpp installed as an npm project (setup-deps step 4), for the
# application test (tests/app). Optional: that test is skipped without it.
if(STANDIN_NODE_APP_DIR AND NOT EXISTS "${STANDIN_NODE_APP_DIR}/node_modules/node-llama-cpp/package.json")
    message(STATUS "standin: no node-llama-cpp in ${STANDIN_NODE_APP_DIR}: application test skipped")
    unset(STANDIN_NODE_APP_DIR)
endif()

# libggml: the backend registry and loader (ggml_backend_load, dev_by_name, ...).
# Tools link it; the plugin must not (it links ggml-base only).
find_library(STANDIN_GGML_LIB NAMES ggml PATHS "${STANDIN_LLAMA_BIN_DIR}" NO_DEFAULT_PATH REQUIRED)
add_library(ggml::ggml SHARED IMPORTED GLOBAL)
set_target_properties(ggml::ggml PROPERTIES
    IMPORTED_LOCATION "${STANDIN_GGML_LIB}"
    INTERFACE_INCLUDE_DIRECTORIES "${STANDIN_GGML_PUBLIC_INCLUDE}")

# libllama: the `standin logits` tool runs models through it, as llama.cpp's own
# tools do. The models directory (vocabulary-only GGUFs) comes with it, for
# `standin make-model`.
find_library(STANDIN_LLAMA_LIB NAMES llama PATHS "${STANDIN_LLAMA_BIN_DIR}" NO_DEFAULT_PATH REQUIRED)
add_library(llama::llama SHARED IMPORTED GLOBAL)
set_target_properties(llama::llama PROPERTIES
    IMPORTED_LOCATION "${STANDIN_LLAMA_LIB}"
    INTERFACE_INCLUDE_DIRECTORIES "${STANDIN_LLAMA_SRC_DIR}/include;${STANDIN_GGML_PUBLIC_INCLUDE}"
    INTERFACE_COMPILE_DEFINITIONS "STANDIN_LLAMA_MODELS_DIR=\"${STANDIN_LLAMA_SRC_DIR}/models\"")
