# `standin ab` on the tiny Q8_0 model (label tool): every node of its graph
# replayed on STANDIN_HOST0 and on ggml-cpu. Included from
# tests/peer/CMakeLists.txt after model_tests.cmake (MODELS, STANDIN, the
# model_tiny_q8_0 fixture).
#
# The bound: the host kernels agree with ggml-cpu to NMSE ~1e-14 on every op
# but flash attention (F16 K/V, ~2e-7), so 1e-5 fails any real error. Each
# test must also see every op type of the llama graph it runs.
set(AB_MODEL ${MODELS}/tiny-q8_0.gguf)
set(AB_OPS_NO_FA "ADD,CONT,GET_ROWS,MUL,MUL_MAT,RMS_NORM,ROPE,SET_ROWS,SOFT_MAX,SWIGLU")
set(AB_OPS_FA "ADD,FLASH_ATTN_EXT,GET_ROWS,MUL,MUL_MAT,RMS_NORM,ROPE,SET_ROWS,SWIGLU")

foreach(fa off on)
    if(fa STREQUAL "on")
        set(ops ${AB_OPS_FA})
    else()
        set(ops ${AB_OPS_NO_FA})
    endif()
    string(REPLACE "," " " ops_listed "${ops}")
    add_test(NAME tool.ab.tiny_q8_0.fa_${fa}
             COMMAND sh -c "\"$0\" \"$@\"; echo \"exit=$?\"" ${STANDIN} ab --plugin ${PLUGIN} --model ${AB_MODEL}
                     --device STANDIN_HOST0 --flash-attn ${fa} --reps 1 --max-nmse 1e-5 --expect-ops ${ops}
                     --csv ${CMAKE_BINARY_DIR}/ab-tiny-q8_0-fa_${fa}.csv)
    set_tests_properties(tool.ab.tiny_q8_0.fa_${fa} PROPERTIES LABELS tool TIMEOUT 300
        FIXTURES_REQUIRED model_tiny_q8_0
        PASS_REGULAR_EXPRESSION "compared ops: ${ops_listed}\nstandin ab: [0-9]+ nodes compared, 0 failing.*exit=0")
endforeach()

# A planted wrong kernel (GGML_STANDIN_FAULT=perturb:SOFT_MAX scales the host
# device's softmax output): ab must name the four softmax nodes, no other
# node, and exit 1.
add_test(NAME tool.ab.finds_planted_fault
         COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_FAULT=perturb:SOFT_MAX
                 sh -c "\"$0\" \"$@\"; echo \"exit=$?\"" ${STANDIN} ab --plugin ${PLUGIN} --model ${AB_MODEL}
                 --device STANDIN_HOST0 --reps 1 --max-nmse 1e-5 --top 4)
set_tests_properties(tool.ab.finds_planted_fault PROPERTIES LABELS tool TIMEOUT 300
    FIXTURES_REQUIRED model_tiny_q8_0
    PASS_REGULAR_EXPRESSION "FAIL: node [0-9]+ kq_soft_max-0 \\(SOFT_MAX [^)]*\\): NMSE [1-9][.0-9]*e-0[12] .*FAIL: node [0-9]+ kq_soft_max-3 .*standin ab: [0-9]+ nodes compared, 4 failing.*exit=1")

# --reference real: the reference is the library GGML_STANDIN_REAL names (here
# the prebuilt ggml-cpu, standing in for a GPU library; standin kept standalone).
if(STANDIN_PREBUILT_CPU_DIR)
    set(real ${STANDIN_PREBUILT_CPU_DIR}/bins/linux-x64/libggml-cpu-x64.so)
    add_test(NAME tool.ab.reference_real
             COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_MODE=standalone GGML_STANDIN_REAL=${real}
                     ${STANDIN} ab --plugin ${PLUGIN} --model ${AB_MODEL} --reference real --ops MUL_MAT,SOFT_MAX
                     --reps 1 --max-nmse 1e-5 --expect-ops MUL_MAT,SOFT_MAX)
    set_tests_properties(tool.ab.reference_real PROPERTIES LABELS tool TIMEOUT 300
        FIXTURES_REQUIRED model_tiny_q8_0
        PASS_REGULAR_EXPRESSION "reference: CPU \\(GGML_STANDIN_REAL=[^)]*libggml-cpu-x64.so\\).*compared ops: MUL_MAT SOFT_MAX\nstandin ab: [0-9]+ nodes compared, 0 failing")
endif()
