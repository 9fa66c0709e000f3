# Model-level tests (label "model"): random-weight llama models written by
# `standin make-model`, run by unmodified llama.cpp tools and by `standin logits`.
# Included from tests/peer/CMakeLists.txt (PLUGIN, BIN set there).

# The writer's unit tests (tests/tools/test_gguf_model.cpp) need its source.
target_sources(standin_unit_tests PRIVATE ${PROJECT_SOURCE_DIR}/tools/standin/gguf_model.cpp)

set(MODELS ${CMAKE_BINARY_DIR}/models)
file(MAKE_DIRECTORY ${MODELS})
set(STANDIN $<TARGET_FILE:standin>)

# llama-completion's closing perf line counts the decode runs after the prompt:
# -n 8 with --ignore-eos gives exactly 7, so this matches only a full generation.
set(GENERATED_8 "eval time = +[0-9.]+ ms / +7 runs")

foreach(type f32 q8_0)
    set(model ${MODELS}/tiny-${type}.gguf)
    add_test(NAME model.make.tiny_${type}
             COMMAND ${STANDIN} make-model --shape tiny --type ${type} --seed 1 --out ${model})
    set_tests_properties(model.make.tiny_${type} PROPERTIES LABELS model TIMEOUT 300
        FIXTURES_SETUP model_tiny_${type} PASS_REGULAR_EXPRESSION "wrote .*tiny-${type}.gguf: llama tiny")

    # ggml-cpu alone, no plugin: the file itself is a valid llama model.
    add_test(NAME model.completion.tiny_${type}.cpu
             COMMAND ${BIN}/llama-completion -m ${model} -p Hello -n 8 --ignore-eos -s 1 -c 256
                     -no-cnv --device none --no-warmup)
    set_tests_properties(model.completion.tiny_${type}.cpu PROPERTIES LABELS model TIMEOUT 300
        FIXTURES_REQUIRED model_tiny_${type} PASS_REGULAR_EXPRESSION "${GENERATED_8}")

    # Reference logits on ggml-cpu, then every layer offloaded to STANDIN_HOST0:
    # NMSE <= 1e-4 for both types. (Measured: F32 1.6e-7; Q8_0 0, because the
    # host mat-vec quantizes activations with ggml-cpu's own rounding.) The two
    # types also use two batch sizes (the prompt's 22 tokens, and 64).
    set(max_nmse 1e-4)
    if(type STREQUAL "f32")
        set(n_tokens 0)
    else()
        set(n_tokens 64)
    endif()
    set(ref ${MODELS}/tiny-${type}.cpu.logits)
    add_test(NAME model.logits.tiny_${type}.cpu
             COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${model} --device none --n-tokens ${n_tokens}
                     --out ${ref})
    set_tests_properties(model.logits.tiny_${type}.cpu PROPERTIES LABELS model TIMEOUT 300
        FIXTURES_REQUIRED model_tiny_${type} FIXTURES_SETUP logits_tiny_${type}
        PASS_REGULAR_EXPRESSION "computed on CPU: .*wrote ")
    add_test(NAME model.logits.tiny_${type}.host
             COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${model} --device STANDIN_HOST0
                     --n-tokens ${n_tokens} --compare ${ref} --max-nmse ${max_nmse})
    set_tests_properties(model.logits.tiny_${type}.host PROPERTIES LABELS model TIMEOUT 300
        FIXTURES_REQUIRED "model_tiny_${type};logits_tiny_${type}")
endforeach()

# Generation with every layer on STANDIN_HOST0, and llama-bench on it.
add_test(NAME model.completion.tiny_q8_0.host
         COMMAND ${CMAKE_COMMAND} -E env GGML_BACKEND_PATH=${PLUGIN}
                 ${BIN}/llama-completion -m ${MODELS}/tiny-q8_0.gguf -p Hello -n 8 --ignore-eos -s 1 -c 256
                 -no-cnv -dev STANDIN_HOST0 -ngl 99 --no-warmup)
set_tests_properties(model.completion.tiny_q8_0.host PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_q8_0 PASS_REGULAR_EXPRESSION "${GENERATED_8}")
add_test(NAME model.bench.tiny_q8_0.host
         COMMAND ${CMAKE_COMMAND} -E env GGML_BACKEND_PATH=${PLUGIN}
                 ${BIN}/llama-bench -m ${MODELS}/tiny-q8_0.gguf -p 32 -n 8 -r 1 -dev STANDIN_HOST0 -ngl 99)
set_tests_properties(model.bench.tiny_q8_0.host PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_q8_0
    PASS_REGULAR_EXPRESSION "STANDIN_HOST0 +\\| +pp32 +\\| +[0-9]+\\.[0-9]+ .*STANDIN_HOST0 +\\| +tg8 +\\| +[0-9]+\\.[0-9]+")

# Bad arguments: a clear message and a non-zero exit (the shell appends the code).
add_test(NAME model.make.bad_path
         COMMAND sh -c "\"$0\" make-model --shape tiny --out /nonexistent-dir/m.gguf; echo \"exit=$?\""
                 ${STANDIN})
set_tests_properties(model.make.bad_path PROPERTIES LABELS model
    PASS_REGULAR_EXPRESSION "cannot create /nonexistent-dir/m.gguf.partial: No such file or directory.*exit=1")
add_test(NAME model.logits.bad_device
         COMMAND sh -c "\"$0\" logits --plugin \"$1\" --model \"$2\" --device NOPE0; echo \"exit=$?\""
                 ${STANDIN} ${PLUGIN} ${MODELS}/tiny-q8_0.gguf)
set_tests_properties(model.logits.bad_device PROPERTIES LABELS model FIXTURES_REQUIRED model_tiny_q8_0
    PASS_REGULAR_EXPRESSION "no device named NOPE0.*exit=2")
