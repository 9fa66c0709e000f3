# Several devices (label "multi"): llama's layer and tensor splits across two
# standin host devices, and a standin device served by ggml's rpc-server over
# loopback. Each run's logits are held to the ggml-cpu reference of
# model_tests.cmake (same models, fixtures and MODELS directory).
set(RPC_SERVER ${BIN}/ggml-rpc-server)
set(TWO_HOSTS ${CMAKE_COMMAND} -E env GGML_STANDIN_HOST_DEVICES=2)

# Layer split: each device holds whole layers; the tool fails when either
# device computed no node. Both types, both batch sizes and both bounds of
# model_tests.cmake (Q8_0: 1e-3, as one host device; measured 1.9e-4).
foreach(type f32 q8_0)
    if(type STREQUAL "f32")
        set(n_tokens 0)
        set(max_nmse 1e-4)
    else()
        set(n_tokens 64)
        set(max_nmse 1e-3)
    endif()
    add_test(NAME multi.layer.tiny_${type}.host2
             COMMAND ${TWO_HOSTS} ${STANDIN} logits --plugin ${PLUGIN} --model ${MODELS}/tiny-${type}.gguf
                     --device STANDIN_HOST0,STANDIN_HOST1 --split-mode layer --n-tokens ${n_tokens}
                     --compare ${MODELS}/tiny-${type}.cpu.logits --max-nmse ${max_nmse})
    set_tests_properties(multi.layer.tiny_${type}.host2 PROPERTIES LABELS multi TIMEOUT 120
        FIXTURES_REQUIRED "model_tiny_${type};logits_tiny_${type}"
        PASS_REGULAR_EXPRESSION "computed on STANDIN_HOST0: .*computed on STANDIN_HOST1: .*: OK")
endforeach()

# Tensor split: llama wraps the devices in ggml's meta device, which needs
# flash attention (so a reference with it) and buffers that are not
# host-visible (GGML_STANDIN_HOST_DISCRETE=1; README, multi-device). The
# partial sums are added by standin's communicator (glue/comm.cpp; --verbose
# shows its log line). Measured NMSE 6.7e-7: what one device with flash
# attention gives too (6.72e-7), so the split adds nothing measurable; ggml's
# generic all-reduce gave the same figure.
set(ref_fa ${MODELS}/tiny-f32.cpu-fa.logits)
add_test(NAME multi.logits.tiny_f32.cpu_fa
         COMMAND ${STANDIN} logits --plugin ${PLUGIN} --model ${MODELS}/tiny-f32.gguf --device none
                 --flash-attn on --out ${ref_fa})
set_tests_properties(multi.logits.tiny_f32.cpu_fa PROPERTIES LABELS multi TIMEOUT 120
    FIXTURES_REQUIRED model_tiny_f32 FIXTURES_SETUP logits_tiny_f32_fa PASS_REGULAR_EXPRESSION "wrote ")
add_test(NAME multi.tensor.tiny_f32.host2
         COMMAND ${TWO_HOSTS} GGML_STANDIN_HOST_DISCRETE=1
                 ${STANDIN} logits --plugin ${PLUGIN} --model ${MODELS}/tiny-f32.gguf
                 --device STANDIN_HOST0,STANDIN_HOST1 --split-mode tensor --flash-attn on
                 --compare ${ref_fa} --max-nmse 1e-4 --verbose)
set_tests_properties(multi.tensor.tiny_f32.host2 PROPERTIES LABELS multi TIMEOUT 120
    FIXTURES_REQUIRED "model_tiny_f32;logits_tiny_f32_fa"
    PASS_REGULAR_EXPRESSION "all-reduce across STANDIN_HOST0,STANDIN_HOST1 by standin.*computed on Meta\\(STANDIN_HOST0,STANDIN_HOST1\\): [0-9]+ nodes.*: OK")

# ggml-rpc: rpc-server (pinned build) serves STANDIN_HOST0 on 127.0.0.1; the
# client sees it as RPC0 and runs every layer there.
add_test(NAME multi.rpc.tiny_f32.host
         COMMAND ${HERE}/rpc_logits.sh ${RPC_SERVER} ${PLUGIN} STANDIN_HOST0
                 ${STANDIN} logits --plugin ${PLUGIN} --model ${MODELS}/tiny-f32.gguf --device RPC0
                 --compare ${MODELS}/tiny-f32.cpu.logits --max-nmse 1e-4)
set_tests_properties(multi.rpc.tiny_f32.host PROPERTIES LABELS multi TIMEOUT 120
    FIXTURES_REQUIRED "model_tiny_f32;logits_tiny_f32"
    PASS_REGULAR_EXPRESSION "computed on RPC0\\[127\\.0\\.0\\.1:[0-9]+\\]: [0-9]+ nodes.*: OK")

# Without GGML_STANDIN_HOST_DISCRETE the meta device would crash llama's loader
# (see above): the tool refuses with a message instead (the shell appends the code).
add_test(NAME multi.tensor.host_buffers_refused
         COMMAND ${TWO_HOSTS} sh -c "\"$0\" logits --plugin \"$1\" --model \"$2\" --device STANDIN_HOST0,STANDIN_HOST1 --split-mode tensor --flash-attn on; echo \"exit=$?\""
                 ${STANDIN} ${PLUGIN} ${MODELS}/tiny-f32.gguf)
set_tests_properties(multi.tensor.host_buffers_refused PROPERTIES LABELS multi TIMEOUT 60
    FIXTURES_REQUIRED model_tiny_f32
    PASS_REGULAR_EXPRESSION "set GGML_STANDIN_HOST_DISCRETE=1.*exit=2")

# A client's graph cannot take down `standin rpc-server`: a node standin lacks
# runs on the CPU, a graph nothing runs ends that client's connection only
# (tests/peer/rpc_guard.sh; with ggml's own rpc-server the first graph kills it).
add_executable(rpc_client ${HERE}/rpc_client.cpp)
target_link_libraries(rpc_client PRIVATE ggml::ggml ggml::base)
set_target_properties(rpc_client PROPERTIES BUILD_RPATH "${STANDIN_LLAMA_BIN_DIR}")
add_test(NAME multi.rpc.guard
         COMMAND ${HERE}/rpc_guard.sh standin ${STANDIN} ${PLUGIN} $<TARGET_FILE:rpc_client> ${BIN})
set_tests_properties(multi.rpc.guard PROPERTIES LABELS multi TIMEOUT 180
    PASS_REGULAR_EXPRESSION "rpc guard: the server survived a bad graph and served the next client: ok")
