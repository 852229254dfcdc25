# Section 09 (Triton) and the Python sections' harness. The CPU path runs the kernel under Triton's
# interpreter (scripts/requirements-cpu.txt installs triton); where triton is missing the program
# says so and exits 77, which ctest counts as skipped.
set(S09 ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/solutions/09_triton.py)
set(L09 ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/labs/09_triton.py)
set(CASES_PY ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python_section_cases.py)
if(LAB_BUILD_SOLUTIONS)  # it runs the solutions of 09 and 10, absent from a student release
  add_test(NAME python_harness.unit COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python_harness.py ${BIN})
  set_tests_properties(python_harness.unit PROPERTIES LABELS cpu TIMEOUT 900)
endif()
lab_test(bad_input.09.d96 cpu 2 MATCH "^bad input: D=96 is not supported by 09_triton" COMMAND ${S09} --d 96)
lab_test(bad_input.09.fp32 cpu 2 MATCH "^bad input: dtype fp32 is not supported" COMMAND ${S09} --dtype fp32)
lab_test(bad_input.09.option cpu 2 MATCH "^bad input: unknown option --no-such-option" COMMAND ${S09} --no-such-option)
# Every case of tests/cases/09_triton.json that the interpreter can run: the solution passes, bad
# inputs are refused, the --bug cases fail, the stub fails with "output not written".
if(LAB_BUILD_SOLUTIONS)  # the solution's case list (a release checks the student's with scripts/lab check 09)
  lab_test(cpu_interp.09.cases cpu 0 MATCH "passed, 0 failed" COMMAND ${CASES_PY} 09_triton --cpu)
endif()
lab_test(cpu_interp.09.stub_not_written cpu 1 MATCH "output not written" COMMAND ${L09} --cpu --t 65 --h 2 --causal)
# The optional --bug branches of the student's online-softmax: a lab without them says the pitfall
# was not planted (exit 77, never a PASS that looks like a missed catch). Where triton is missing,
# the program says that instead.
foreach(bug no-rescale local-causal)
  add_test(NAME cpu_interp.09.stub_bug_${bug}_not_planted
           COMMAND ${EXPECT} --code 77 --stub ${PROJECT_SOURCE_DIR}/labs/09_triton.py
                   "--match=^not checked here: --bug ${bug}: your online-softmax has no branch for it|^cannot run here: needs triton"
                   -- ${L09} --cpu --t 100 --t-kv 257 --h 2 --causal --bug ${bug})
  set_tests_properties(cpu_interp.09.stub_bug_${bug}_not_planted PROPERTIES LABELS cpu SKIP_RETURN_CODE 77)
endforeach()
# From another folder too (the program finds its harness from its own path).
if(LAB_BUILD_SOLUTIONS)  # it runs solutions/09_triton.py
  add_test(NAME cpu_interp.09.from_elsewhere COMMAND ${EXPECT} --code 0 --skip-code 77 --match=^PASS -- ${S09} --cpu --t 40 --h 2 --causal)
  set_tests_properties(cpu_interp.09.from_elsewhere PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 WORKING_DIRECTORY /)
endif()
# Without a GPU the program says why and exits 77.
lab_test(no_gpu.09.exit_77_or_pass cpu "77;0" MATCH "^cannot run here:|^PASS: 09_triton" COMMAND ${S09} --t 65 --iters 0)
# GPU: the whole case file on the GPU (autotuned tiles), the stub fails cleanly, the bugs are caught.
if(LAB_BUILD_SOLUTIONS)  # the solution's case list
  lab_test(gpu.09_triton.cases gpu 0 MATCH "passed, 0 failed" COMMAND ${CASES_PY} 09_triton)
endif()
# Exercise 4's line counts: the counter, and the handout's table is the current one.
if(LAB_BUILD_SOLUTIONS)  # it counts the solutions' lines
  add_test(NAME loc.counts_and_table COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_loc.py)
  set_tests_properties(loc.counts_and_table PROPERTIES LABELS cpu TIMEOUT 120)
endif()
# The variant triton-tma (K/V through tensor descriptors) under the interpreter: ragged, causal T_q != T_kv, GQA, bf16.
lab_test(cpu_interp.09.tma_ragged_causal cpu 0 MATCH "^PASS" COMMAND ${S09} --cpu --variant triton-tma --t 100 --t-kv 257 --causal --h 2)
lab_test(cpu_interp.09.tma_rows_without_keys cpu 0 MATCH "^PASS" COMMAND ${S09} --cpu --variant triton-tma --t 257 --t-kv 100 --causal --h 2 --dtype bf16)
lab_test(cpu_interp.09.tma_gqa_d128 cpu 0 MATCH "^PASS" COMMAND ${S09} --cpu --variant triton-tma --t 65 --h 4 --h-kv 2 --d 128 --dtype bf16)
