# Every architecture of the pinned tree (label "model"): llama.cpp's own
# test-llama-archs builds a random model of each one and compares every
# device's logits with ggml-cpu's (NMSE <= 1e-4) and a save/load roundtrip.
# Two standin host devices give the layer-split rows (one per device) and a
# real tensor split (ggml's meta device over both); GGML_STANDIN_HOST_DISCRETE
# is what tensor split over host devices needs (README, several devices). A
# node a device declines would cut the meta device's split (an abort in the
# pinned tree); each row passing proves every op of every architecture is run
# by standin or split cleanly. About 80 s on 2 cores. The seed is fixed, so a
# failure reproduces. Included from tests/peer/CMakeLists.txt.
set(ARCHS_TOOL ${BIN}/test-llama-archs)
if(EXISTS ${ARCHS_TOOL})
    add_library(standin_load_backends SHARED ${HERE}/load_backends.c)
    target_link_libraries(standin_load_backends PRIVATE ggml::ggml)
    add_test(NAME model.archs.host2
             COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_HOST_DEVICES=2 GGML_STANDIN_HOST_DISCRETE=1
                     ${HERE}/run_llama_archs.sh ${ARCHS_TOOL} $<TARGET_FILE:standin_load_backends> ${PLUGIN}
                     ${CMAKE_BINARY_DIR}/model-archs-host2.log -s 42)
    set_tests_properties(model.archs.host2 PROPERTIES LABELS "model;multi" TIMEOUT 900
        PASS_REGULAR_EXPRESSION "Meta \\[tensor\\]: OK [1-9][0-9]*, [^\n]*\nstandin host device[^\n]*\\[layer\\]: OK [1-9][0-9]*.*all architectures OK")

    # The same over the CUDA device (label gpu; skipped without one): its
    # layer-split row and the meta device over it. Host devices are left out,
    # so the meta device holds device memory only.
    add_test(NAME model.archs.cuda
             COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_HOST_DEVICES=0
                     ${HERE}/if_device.sh $<TARGET_FILE:standin> ${PLUGIN} STANDIN_CUDA0
                     ${HERE}/run_llama_archs.sh ${ARCHS_TOOL} $<TARGET_FILE:standin_load_backends> ${PLUGIN}
                     ${CMAKE_BINARY_DIR}/model-archs-cuda.log -s 42)
    set_tests_properties(model.archs.cuda PROPERTIES LABELS "model;multi;gpu" TIMEOUT 1800 SKIP_RETURN_CODE 77
        PASS_REGULAR_EXPRESSION "Meta \\[tensor\\]: OK [1-9][0-9]*, .*all architectures OK")

    # A planted gap (GGML_STANDIN_FAULT=decline:OP, every standin device
    # declines the op). arcee squares the split FFN activations: on the CPU the
    # meta device could not split around that node and aborted, so standin
    # accepts it inside the tensor split and the decode fails with its error
    # (Note [declining inside a tensor split], glue/meta_split.h); the layer
    # split rows before it still run the op on the CPU and pass. llama's MoE
    # routing (ARGSORT) is whole on every device: declined, it runs on the
    # CPU and every row, tensor split included, still passes. The node's own
    # error line ("... is not supported here") is not required: the tool's
    # logger (llama's common log) writes from a worker thread, and on a loaded
    # machine that line was missing from the output once (a clean-clone CI
    # run) while the decode failed as it should.
    add_test(NAME model.archs.decline_split_data
             COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_HOST_DEVICES=2 GGML_STANDIN_HOST_DISCRETE=1
                     GGML_STANDIN_FAULT=decline:SQR GGML_BACKEND_PATH=${PLUGIN}
                     LD_PRELOAD=$<TARGET_FILE:standin_load_backends>
                     sh -c "\"$0\" -a arcee -s 42; echo \"exit=$?\"" ${ARCHS_TOOL})
    set_tests_properties(model.archs.decline_split_data PROPERTIES LABELS "model;multi" TIMEOUT 300
        PASS_REGULAR_EXPRESSION "standin host device[^\n]*OK.*STANDIN_HOST0: cannot run SQR [^\n]*accepted.*encountered runtime error: failed to decode batch.*exit=255"
        FAIL_REGULAR_EXPRESSION "GGML_ASSERT|ggml_abort|Segmentation")
    add_test(NAME model.archs.decline_whole_data
             COMMAND ${CMAKE_COMMAND} -E env GGML_STANDIN_HOST_DEVICES=2 GGML_STANDIN_HOST_DISCRETE=1
                     GGML_STANDIN_FAULT=decline:ARGSORT
                     ${HERE}/run_llama_archs.sh ${ARCHS_TOOL} $<TARGET_FILE:standin_load_backends> ${PLUGIN}
                     ${CMAKE_BINARY_DIR}/model-archs-decline-argsort.log -a llama -s 42)
    set_tests_properties(model.archs.decline_whole_data PROPERTIES LABELS "model;multi" TIMEOUT 300
        PASS_REGULAR_EXPRESSION "Meta \\[tensor\\]: OK 2, SKIP 0, FAIL 0.*all architectures OK"
        FAIL_REGULAR_EXPRESSION "cannot run ARGSORT")
else()
    message(WARNING "standin: ${ARCHS_TOOL} not found (scripts/setup-deps builds it); model.archs.host2 not registered")
endif()
