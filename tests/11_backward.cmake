# ---- section 11 backward: dQ, dK, dV against fp64 gradients --------------------------------------
# (included by tests/CMakeLists.txt; the section's programs are added by the top-level CMakeLists.txt)
set(BWD ${BIN}/11_backward)
set(BWD_SHAPE --t 130 --t-kv 200 --causal --h 4 --h-kv 2)  # ragged tiles, bottom-right causal, GQA
lab_test(bad_input.11.d96 cpu 2 MATCH "^bad input: D=96 is not supported by 11_backward" COMMAND ${BWD} --d 96)
lab_test(bad_input.11.fp32 cpu 2 MATCH "^bad input: dtype fp32 is not supported by 11_backward" COMMAND ${BWD} --dtype fp32)
lab_test(bad_input.11.gqa cpu 2 MATCH "^bad input: H=6 is not a multiple of H_kv=4" COMMAND ${BWD} --h 6 --h-kv 4)
foreach(dt fp16 bf16)
  foreach(d 64 128)
    lab_test(cpu_model.11.${dt}_d${d} cpu 0 MATCH "PASS" COMMAND ${BWD} --cpu --dtype ${dt} --d ${d} ${BWD_SHAPE})
  endforeach()
endforeach()
lab_test(cpu_model.11.rows_without_keys cpu 0 MATCH "PASS" COMMAND ${BWD} --cpu --t 200 --t-kv 77 --causal --h 2 --d 128 --dtype bf16)
lab_test(cpu_model.11.t1 cpu 0 MATCH "PASS" COMMAND ${BWD} --cpu --t 1 --h 2)
# The wgmma variants' CPU model is the section's (the Hopper kernel runs the same exercises).
lab_test(cpu_model.11.wgmma cpu 0 MATCH "PASS" COMMAND ${BWD} --cpu --variant wgmma ${BWD_SHAPE})
lab_test(cpu_model.11.sampled_check cpu 0 MATCH "PASS" "query rows, .* key rows" COMMAND ${BWD} --cpu --t 1000 --h 2 --causal --check sample)
# Each pitfall is caught, by the gradient it breaks.
lab_test(cpu_model.11.bug_d_without_do cpu 1 MATCH "FAIL" "too far from fp64"
         "^           worst: dQ\\[b=0, i=[0-9]+, h=[0-9], d=[0-9]+\\] = .*\\(error [0-9.e+]+\\)$"
         COMMAND ${BWD} --cpu --bug d-without-do ${BWD_SHAPE})
lab_test(cpu_model.11.bug_unscaled_p cpu 1 MATCH "FAIL" "dQ" COMMAND ${BWD} --cpu --bug unscaled-p ${BWD_SHAPE})
lab_test(cpu_model.11.bug_dq_no_accumulate cpu 1 MATCH "FAIL" "dQ too far from fp64" COMMAND ${BWD} --cpu --bug dq-no-accumulate ${BWD_SHAPE})
# The stub fails cleanly without a GPU: the CPU model runs the student's (unwritten) exercises.
lab_test(cpu_model.11.stub_not_written cpu 1 MATCH "FAIL" "output not written"
         "^  check    EXERCISE dsdp is not written yet: recompute_p_and_ds\\(\\) returns false" COMMAND ${BIN}/lab_11_backward --cpu ${BWD_SHAPE})
# Plausible wrong exercise answers: the section asks both functions on the worked example of the
# handout before the run and names the first wrong one, what it gave, what it should give and the
# likely cause, where the gradients alone would show only "too far from fp64" (or pass: a row with
# one key has P = 1 in any base).
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_dsdp_expf_11 11_backward "*p = lab::fast_exp2(s * scale_log2 - lse_log2);"
                   "*p = expf(s * scale_log2 - lse_log2);")
  lab_wrong_answer(wrong_dsdp_plus_lse_11 11_backward "*p = lab::fast_exp2(s * scale_log2 - lse_log2);"
                   "*p = lab::fast_exp2(s * scale_log2 + lse_log2);")
  lab_wrong_answer(wrong_weights_swapped_11 11_backward "*dv_weight = p;\n  *dk_weight = ds;"
                   "*dv_weight = ds;\n  *dk_weight = p;")
  set(BWD_P_CALL "recompute_p_and_ds\\(s=8, dp=1, lse_log2=1\\.895, d_row=0\\.7311, scale_log2=0\\.1803\\)")
  set(BWD_KEY1 "\\(the handout's worked example, key 1\\)")
  lab_test(cpu_model.11.dsdp_natural_exp cpu 1
           MATCH "^  check    EXERCISE dsdp gives a wrong answer: ${BWD_P_CALL} gave P = 0\\.6364, want 0\\.7311 ${BWD_KEY1}: .* is base 2 \\(expf of a base-2 argument\\?\\)$"
           COMMAND ${BIN}/wrong_dsdp_expf_11 --cpu ${BWD_SHAPE} --quiet)
  # One key a row: P = 1 in any base, so the gradients pass; the probe does not.
  lab_test(cpu_model.11.dsdp_natural_exp_one_key cpu 1 MATCH "^  check    EXERCISE dsdp gives a wrong answer: .* gave P = 0\\.6364, want 0\\.7311"
           COMMAND ${BIN}/wrong_dsdp_expf_11 --cpu --t 1 --h 2 --quiet)
  lab_test(cpu_model.11.dsdp_plus_lse cpu 1
           MATCH "^  check    EXERCISE dsdp gives a wrong answer: ${BWD_P_CALL} gave P = 10\\.11, want 0\\.7311 ${BWD_KEY1}: the LSE is subtracted: .*\\(\\+ lse_log2 instead of"
           COMMAND ${BIN}/wrong_dsdp_plus_lse_11 --cpu ${BWD_SHAPE} --quiet)
  lab_test(cpu_model.11.weights_swapped cpu 1
           MATCH "^  check    EXERCISE accumulate gives a wrong answer: dkdv_weights\\(p=0\\.2689, ds=-0\\.1966\\) = \\{dv -0\\.1966, dk 0\\.2689\\}, want \\{dv 0\\.2689, dk -0\\.1966\\}: dV is weighed by P, dK by dS .*: the two are swapped$"
           COMMAND ${BIN}/wrong_weights_swapped_11 --cpu ${BWD_SHAPE} --quiet)
endif()
# The record: a valid schema-1 record with the gradients' errors.
if(LAB_BUILD_SOLUTIONS)  # a record of the solution
  add_test(NAME record.11.clean COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_CURRENT_BINARY_DIR}/record_11.json)
  add_test(NAME record.11.run COMMAND ${BWD} --cpu ${BWD_SHAPE} --json ${CMAKE_CURRENT_BINARY_DIR}/record_11.json --quiet)
  add_test(NAME record.11.validate COMMAND record_check ${CMAKE_CURRENT_BINARY_DIR}/record_11.json --expect 1)
  set_tests_properties(record.11.clean PROPERTIES FIXTURES_SETUP rec11_clean LABELS cpu)
  set_tests_properties(record.11.run PROPERTIES FIXTURES_REQUIRED rec11_clean FIXTURES_SETUP rec11_file LABELS cpu)
  set_tests_properties(record.11.validate PROPERTIES FIXTURES_REQUIRED rec11_file LABELS cpu)
  # Under --check none each gradient's verdict is what was checked, that it is written (a bench record).
  add_test(NAME record.11.check_none_gradients_written
           COMMAND ${Python3_EXECUTABLE} -c "import json, subprocess, sys, tempfile, os
path = os.path.join(tempfile.mkdtemp(), 'r.json')
subprocess.run([sys.argv[1], '--cpu', '--t', '64', '--h', '2', '--check', 'none', '--json', path], check=True, capture_output=True)
grads = json.load(open(path))[-1]['check']['gradients']
sys.exit(0 if all(g['passed'] and g['unwritten'] == 0 for g in grads.values()) else 'a written gradient reads as failed: ' + str(grads))"
           ${BWD})
  set_tests_properties(record.11.check_none_gradients_written PROPERTIES LABELS cpu)
endif()

# GPU: the case list passes on both variants, the stub fails cleanly, the bugs are caught; the
# deterministic variant is bitwise reproducible (the atomic one may be; it is not promised).
lab_test(gpu.11_backward.check_solution gpu 0 MATCH " 0 failed" COMMAND ${LAB} check 11 --solution --require-gpu)
lab_test(gpu.11_backward.check_stub_fails_cleanly gpu 0 MATCH " 0 failed" COMMAND ${LAB} check 11 --expect-fail --require-gpu)
lab_test(gpu.11_backward.stub_fails gpu 1 MATCH "FAIL" "not written" COMMAND ${BIN}/lab_11_backward --t 65 --iters 0)
lab_test(gpu.11_backward.deterministic_reproducible gpu 0 MATCH "bitwise reproducible yes" "PASS"
         COMMAND ${BWD} --variant deterministic --t 2048 --h 4 --causal --dtype bf16 --iters 0)
# Hopper only (exit 77 elsewhere): the wgmma kernel's dK, dV with the deterministic dQ pass.
lab_test(gpu.11_backward.wgmma_deterministic_reproducible gpu 0 MATCH "bitwise reproducible yes" "PASS"
         COMMAND ${BWD} --variant wgmma-deterministic --t 2048 --h 4 --h-kv 2 --causal --dtype bf16 --iters 0)
# The mma.sync variants under --smem-limit: at 163 KB a block (an A100) the record names the layout
# that ran (the atomic variant's dQ staged in Pᵀ's buffer, 8 KB less); at 99 KB (RTX 30/40) both say
# "cannot run here" before any launch. The case list runs the 163 KB layout against fp64.
if(LAB_BUILD_SOLUTIONS)
  add_test(NAME gpu.11_backward.smem_limit
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/backward_smem_limit.py ${BWD})
  set_tests_properties(gpu.11_backward.smem_limit PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# ---- the lab's attention as a PyTorch op (common/torch_op): bad inputs raise a Python exception
# with a reason (no GPU needed); on a GPU, outputs and gradients against fp64 autograd, opcheck,
# torch.compile. Both exit 77 where torch (or the GPU) is missing.
lab_test(torch_op.bad_inputs cpu 0 MATCH "PASS: 9 of 9 bad inputs refused"
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/torch_op_check.py --bad-inputs)
lab_test(gpu.torch_op.gradients gpu 0 MATCH "PASS: lab attention op"
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/torch_op_check.py --gpu)

# The atomic variant's dQ restaging (lab::sm80::row_stage_word): every word of the stage written
# once, the row loads get the fragments' values, no bank conflicts; lane by lane, on the host.
add_executable(test_row_stage test_row_stage.cu)
target_link_libraries(test_row_stage PRIVATE lab_common)
set_target_properties(test_row_stage PROPERTIES CUDA_ARCHITECTURES "${LAB_CUDA_ARCHITECTURES}")
lab_test(unit.11.row_stage cpu 0 MATCH "^PASS: 0 of" COMMAND ${BIN}/test_row_stage)
