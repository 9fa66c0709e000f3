# Model-level tests (label "model"): random-weight llama models written by
# `standin make-model`, run by unmodified llama.cpp tools and by `standin logits`.
# Included from tests/peer/CMakeLists.txt (PLUGIN, BIN set there).

set(MODELS ${CMAKE_BINARY_DIR}/models)
file(MAKE_DIRECTORY ${MODELS})
set(STANDIN $<TARGET_FILE:standin>)

# `standin logits` on STANDIN_HOST0 (dev host) or, skipped where there is no
# CUDA device, STANDIN_CUDA0 (dev cuda): sets cmd and labels for add_test.
macro(logits_on dev)
    if("${dev}" STREQUAL host)
        set(cmd ${STANDIN} logits --device STANDIN_HOST0)
        set(labels model)
    else()
        set(cmd ${HERE}/if_device.sh ${STANDIN} ${PLUGIN} STANDIN_CUDA0 ${STANDIN} logits --device STANDIN_CUDA0)
        set(labels "model;gpu")
    endif()
endmacro()

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
    # F32 within 1e-4 (measured 1.6e-7). Q8_0 within 1e-3: the host device
    # quantizes activations with ggml-cpu's own rounding, so the integer sums
    # are ggml-cpu's, but its packed weights (kernels/host/packed.h) add a
    # row's blocks in sequence where ggml-cpu's x86 Q8_0 kernel keeps 8 partial
    # sums, and a random model magnifies the last-bit differences (measured
    # 1.9e-4; the same bound as the CUDA device below). The two types also use
    # two batch sizes (the prompt's 22 tokens, and 64).
    if(type STREQUAL "f32")
        set(n_tokens 0)
        set(max_nmse 1e-4)
    else()
        set(n_tokens 64)
        set(max_nmse 1e-3)
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
    # The same on the CUDA device (skipped where there is none). 64 tokens take
    # the cuBLAS path, 22 the tiled one, one the mat-vec (the last token).
    # Q8_0 is held to 1e-3: on the H200 machine's CPU, ggml-cpu picks other
    # Q8_0 kernels than on an AVX2 machine, and its logits for random models
    # move with them: measured there for a 1B Q8_0 model, ggml-cuda itself is
    # 5.7e-4 from ggml-cpu, standin's CUDA device 5.6e-4 and standin's host
    # device 2.6e-4 (F16 weights: 7.9e-7). README, "Conformance".
    set(cuda_nmse ${max_nmse})
    add_test(NAME model.logits.tiny_${type}.cuda
             COMMAND ${HERE}/if_device.sh ${STANDIN} ${PLUGIN} STANDIN_CUDA0
                     ${STANDIN} logits --plugin ${PLUGIN} --model ${model} --device STANDIN_CUDA0
                     --n-tokens ${n_tokens} --compare ${ref} --max-nmse ${cuda_nmse})
    set_tests_properties(model.logits.tiny_${type}.cuda PROPERTIES LABELS "model;gpu" TIMEOUT 300
        SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "model_tiny_${type};logits_tiny_${type}")
    # Token by token (--ubatch 1, flash attention on): the decode kernels, one
    # graph per token over the KV cache, against the same one-graph reference.
    foreach(dev host cuda)
        logits_on(${dev})
        add_test(NAME model.logits.tiny_${type}.${dev}_decode
                 COMMAND ${cmd} --plugin ${PLUGIN} --model ${model} --n-tokens ${n_tokens} --ubatch 1 --flash-attn on
                         --compare ${ref} --max-nmse ${max_nmse})
        set_tests_properties(model.logits.tiny_${type}.${dev}_decode PROPERTIES LABELS "${labels}" TIMEOUT 300
            SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "model_tiny_${type};logits_tiny_${type}")
    endforeach()
endforeach()

# A quantized K cache without flash attention (llama's -ctk q8_0 -fa off): KQ
# is then a product of the cache's Q8_0 rows, which the kernels before it in
# the same graph have just written (on the CUDA device it must not read them
# before its wait on those kernels: Note [dependent launch]). Token by token,
# against ggml-cpu with the same cache in one graph.
set(kq8_ref ${MODELS}/tiny-q8_0.kq8.cpu.logits)
add_test(NAME model.logits.tiny_q8_0.cpu_kq8
         COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${MODELS}/tiny-q8_0.gguf --device none --n-tokens 64
                 --cache-type-k q8_0 --out ${kq8_ref})
set_tests_properties(model.logits.tiny_q8_0.cpu_kq8 PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_q8_0 FIXTURES_SETUP logits_tiny_q8_0_kq8
    PASS_REGULAR_EXPRESSION "computed on CPU: .*wrote ")
foreach(dev host cuda)
    logits_on(${dev})
    add_test(NAME model.logits.tiny_q8_0.${dev}_decode_kq8
             COMMAND ${cmd} --plugin ${PLUGIN} --model ${MODELS}/tiny-q8_0.gguf --n-tokens 64 --ubatch 1
                     --flash-attn off --cache-type-k q8_0 --compare ${kq8_ref} --max-nmse 1e-3)
    set_tests_properties(model.logits.tiny_q8_0.${dev}_decode_kq8 PROPERTIES LABELS "${labels}" TIMEOUT 300
        SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "model_tiny_q8_0;logits_tiny_q8_0_kq8")
endforeach()

# Q4_0 on STANDIN_HOST0 is held to (nearly) bit-identical logits: ggml-cpu repacks
# Q4_0 weights for AVX2 and sums each row's blocks in sequence, as the host
# device's packed kernels do over the same integer sums and scales (measured
# NMSE 0 at 22 and at 64 tokens; a different order of float additions gives about 1e-4).
set(q4_model ${MODELS}/tiny-q4_0.gguf)
add_test(NAME model.make.tiny_q4_0
         COMMAND ${STANDIN} make-model --shape tiny --type q4_0 --seed 1 --out ${q4_model})
set_tests_properties(model.make.tiny_q4_0 PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_SETUP model_tiny_q4_0 PASS_REGULAR_EXPRESSION "wrote .*tiny-q4_0.gguf: llama tiny")
add_test(NAME model.logits.tiny_q4_0.cpu
         COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${q4_model} --device none --n-tokens 64
                 --out ${MODELS}/tiny-q4_0.cpu.logits)
set_tests_properties(model.logits.tiny_q4_0.cpu PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_q4_0 FIXTURES_SETUP logits_tiny_q4_0 PASS_REGULAR_EXPRESSION "computed on CPU: .*wrote ")
add_test(NAME model.logits.tiny_q4_0.host
         COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${q4_model} --device STANDIN_HOST0 --n-tokens 64
                 --compare ${MODELS}/tiny-q4_0.cpu.logits --max-nmse 1e-5)
set_tests_properties(model.logits.tiny_q4_0.host PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED "model_tiny_q4_0;logits_tiny_q4_0")

# Fused against unfused decoding on STANDIN_CUDA0, the same bits
# (tests/peer/fused_bits.sh; skipped where there is no CUDA device).
macro(fused_bits_test type)
    add_test(NAME model.logits.tiny_${type}.cuda_fused_bits
             COMMAND ${HERE}/if_device.sh ${STANDIN} ${PLUGIN} STANDIN_CUDA0
                     ${HERE}/fused_bits.sh ${STANDIN} ${PLUGIN} ${MODELS}/tiny-${type}.gguf STANDIN_CUDA0
                     ${MODELS}/tiny-${type}.cuda)
    set_tests_properties(model.logits.tiny_${type}.cuda_fused_bits PROPERTIES LABELS "model;gpu" TIMEOUT 300
        SKIP_RETURN_CODE 77 FIXTURES_REQUIRED model_tiny_${type}
        PASS_REGULAR_EXPRESSION "fused and unfused logits are the same bytes")
endmacro()
fused_bits_test(q8_0)
fused_bits_test(q4_0)

# Types `standin make-model` gets from the pinned tree's llama-quantize (an F16
# file converted): Q4_K_M, whose mix of Q4_K and Q6_K the tool reads back from
# the file, Q5_K_M (Q5_K and Q6_K: on the CUDA device, a Q6_K V shares its
# Q and K's launch, launch_qk2), and IQ4_NL, multiplied on the host device in
# integer form (kernels/host/mul_mat_qd.cpp). Held to 1e-3 like Q8_0 above: the
# integer sums are ggml-cpu's, the order of float additions is not (measured
# at 64 tokens: Q4_K_M 2.3e-4, IQ4_NL 1.8e-4).
if(EXISTS ${BIN}/llama-quantize)
    foreach(type q4_k_m q5_k_m iq4_nl)
        set(model ${MODELS}/tiny-${type}.gguf)
        if(type STREQUAL "q4_k_m")
            set(types "q4_K x [0-9]+, q6_K x [0-9]+")
        elseif(type STREQUAL "q5_k_m")
            set(types "q5_K x [0-9]+, q6_K x [0-9]+")
        else()
            set(types "iq4_nl x [0-9]+")
        endif()
        add_test(NAME model.make.tiny_${type}
                 COMMAND ${STANDIN} make-model --shape tiny --type ${type} --seed 1 --quiet --out ${model})
        set_tests_properties(model.make.tiny_${type} PROPERTIES LABELS model TIMEOUT 300
            FIXTURES_SETUP model_tiny_${type} PASS_REGULAR_EXPRESSION "wrote .*tiny-${type}.gguf: llama tiny, ${type} \\(f32 x 9, .*${types}")
        add_test(NAME model.logits.tiny_${type}.cpu
                 COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${model} --device none --n-tokens 64
                         --out ${MODELS}/tiny-${type}.cpu.logits)
        set_tests_properties(model.logits.tiny_${type}.cpu PROPERTIES LABELS model TIMEOUT 300
            FIXTURES_REQUIRED model_tiny_${type} FIXTURES_SETUP logits_tiny_${type}
            PASS_REGULAR_EXPRESSION "computed on CPU: .*wrote ")
        add_test(NAME model.logits.tiny_${type}.host
                 COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${model} --device STANDIN_HOST0 --n-tokens 64
                         --compare ${MODELS}/tiny-${type}.cpu.logits --max-nmse 1e-3)
        set_tests_properties(model.logits.tiny_${type}.host PROPERTIES LABELS model TIMEOUT 300
            FIXTURES_REQUIRED "model_tiny_${type};logits_tiny_${type}")
        fused_bits_test(${type})
    endforeach()
else()
    message(STATUS "standin: no llama-quantize in ${BIN}: the K/IQ model tests are skipped")
endif()

# A mixture of experts (make-model's tiny-moe: llama's MoE layout, 8 experts,
# 2 per token): the routing ops (SOFT_MAX, ARGSORT, GET_ROWS ...) and
# MUL_MAT_ID in a whole model, in one graph and token by token. F32 weights:
# quantized ones differ from ggml-cpu in the last bits, which flips the
# router's pick for a few tokens of a random model and moves their logits far
# (Q8_0 at 64 tokens measured 1.5e-3, 57 of 64 top tokens alike; F32 1.5e-8).
set(moe_model ${MODELS}/tiny-moe-f32.gguf)
set(moe_ref ${MODELS}/tiny-moe-f32.cpu.logits)
add_test(NAME model.make.tiny_moe_f32
         COMMAND ${STANDIN} make-model --shape tiny-moe --type f32 --seed 1 --out ${moe_model})
set_tests_properties(model.make.tiny_moe_f32 PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_SETUP model_tiny_moe PASS_REGULAR_EXPRESSION "wrote .*tiny-moe-f32.gguf: llama tiny-moe")
add_test(NAME model.completion.tiny_moe_f32.cpu
         COMMAND ${BIN}/llama-completion -m ${moe_model} -p Hello -n 8 --ignore-eos -s 1 -c 256
                 -no-cnv --device none --no-warmup)
set_tests_properties(model.completion.tiny_moe_f32.cpu PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_moe PASS_REGULAR_EXPRESSION "${GENERATED_8}")
add_test(NAME model.logits.tiny_moe_f32.cpu
         COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${moe_model} --device none --n-tokens 64
                 --out ${moe_ref})
set_tests_properties(model.logits.tiny_moe_f32.cpu PROPERTIES LABELS model TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_moe FIXTURES_SETUP logits_tiny_moe
    PASS_REGULAR_EXPRESSION "computed on CPU: .*MUL_MAT_ID .*wrote ")
foreach(dev host cuda)
    logits_on(${dev})
    foreach(ub 0 1)
        add_test(NAME model.logits.tiny_moe_f32.${dev}_ubatch${ub}
                 COMMAND ${cmd} --plugin ${PLUGIN} --model ${moe_model} --n-tokens 64 --ubatch ${ub}
                         --compare ${moe_ref} --max-nmse 1e-4)
        set_tests_properties(model.logits.tiny_moe_f32.${dev}_ubatch${ub} PROPERTIES LABELS "${labels}" TIMEOUT 300
            SKIP_RETURN_CODE 77 FIXTURES_REQUIRED "model_tiny_moe;logits_tiny_moe")
    endforeach()
endforeach()

# CUDA graphs: generation replays the decode graph; the text must be the same
# as with graphs off (same kernels, so the same logits and tokens), and the
# counters must show replays, some of them found by the graph's uid (llama
# reuses an unchanged decode graph; standin's log lines pass llama's filter
# with -v).
set(GEN_CUDA ${BIN}/llama-completion -m ${MODELS}/tiny-q8_0.gguf -p Hello -n 16 --ignore-eos -s 1 -c 256
             -no-cnv -dev STANDIN_CUDA0 -ngl 99 --no-warmup --temp 0 -v)
add_test(NAME model.cuda_graphs.tiny_q8_0
         COMMAND ${HERE}/if_device.sh ${STANDIN} ${PLUGIN} STANDIN_CUDA0
                 ${HERE}/compare_runs.sh "GGML_BACKEND_PATH=${PLUGIN} GGML_STANDIN_CUDA_GRAPHS=0"
                 "GGML_BACKEND_PATH=${PLUGIN} GGML_STANDIN_CUDA_GRAPHS=1 GGML_STANDIN_DEBUG=1"
                 "CUDA graphs: replays=[1-9].*\\([1-9][0-9]* by graph uid\\)" ${GEN_CUDA})
set_tests_properties(model.cuda_graphs.tiny_q8_0 PROPERTIES LABELS "model;gpu" TIMEOUT 300
    SKIP_RETURN_CODE 77 FIXTURES_REQUIRED model_tiny_q8_0)

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
