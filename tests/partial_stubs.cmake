# Each exercise the CPU model runs, left undone alone in an otherwise solved lab, fails the CPU
# check (the case list `scripts/lab check NN` runs without a GPU): the proof that a student with
# no GPU is checked on it. A check whose model skipped an exercise, or ran one variant where another
# holds the exercise, would pass such a lab. Built for one architecture (lab_host_program).
# (GPU-only exercises are not here: 04's mma ones, 07's and 12's mma-online-softmax, 08's protocol
# past ring-slot. 01's and 08's single host exercise are the stubs' own tests.)
if(LAB_BUILD_SOLUTIONS)
  set(lab_partial_exercises
      02_v1_tile:ragged 02_v1_tile:online-rescale
      03_v2_loop_order:loop-order 03_v2_loop_order:deferred-normalisation
      04_fp16:scalar-scores 04_fp16:scalar-pv 04_fp16:scalar-store
      05_decode:gqa 05_decode:split-state 05_decode:split-merge
      06_paged:block-table
      07_sliding_window:tile-span 07_sliding_window:edge-mask
      11_backward:dsdp 11_backward:accumulate
      12_ring:shard-map 12_ring:ring-merge)
  foreach(pair ${lab_partial_exercises})
    string(REPLACE ":" ";" parts ${pair})
    list(GET parts 0 sec)
    list(GET parts 1 ex)
    string(REPLACE "-" "_" ex_name ${ex})
    set(target partial_${sec}_no_${ex_name})
    set(src ${CMAKE_CURRENT_BINARY_DIR}/partial/${sec}_no_${ex_name}.cu)
    add_custom_command(OUTPUT ${src}
                       COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/make_labs.py --only ${ex}
                               ${PROJECT_SOURCE_DIR}/solutions/${sec}.cu ${src}
                       DEPENDS ${PROJECT_SOURCE_DIR}/solutions/${sec}.cu ${PROJECT_SOURCE_DIR}/scripts/make_labs.py)
    lab_host_program(${target} ${src} ${sec})
    target_compile_definitions(${target} PRIVATE LAB_BUILD_KIND="lab")
    add_test(NAME partial.${sec}.${ex}_undone_fails_the_cpu_check
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/partial_stub_fails.py ${BIN}/${target} ${sec})
    set_tests_properties(partial.${sec}.${ex}_undone_fails_the_cpu_check PROPERTIES LABELS cpu TIMEOUT 600)
  endforeach()
endif()
