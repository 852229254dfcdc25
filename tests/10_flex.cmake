# Section 10 (FlexAttention). The CPU path runs FlexAttention eagerly and needs PyTorch
# (scripts/requirements-cpu.txt); where it is missing the program says so and exits 77 (skipped).
set(S10 ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/solutions/10_flex.py)
lab_test(bad_input.10.window_needs_w cpu 2 MATCH "^bad input: --variant window needs --causal --window W" COMMAND ${S10} --variant window --causal)
lab_test(bad_input.10.softcap_inf cpu 2 MATCH "^bad input: --softcap must be a finite number > 0$" COMMAND ${S10} --cpu --t 16 --softcap inf)
# More documents than keys would leave some empty: refused, not silently fewer.
lab_test(bad_input.10.docs_over_t_kv cpu 2 MATCH "^bad input: --docs must be <= T_kv \\(10 here\\)"
         COMMAND ${S10} --cpu --variant document --docs 1000 --t 10)
lab_test(bad_input.10.values_one cpu 2 MATCH "^bad input: --values 1 shows no recompile" COMMAND ${S10} --cpu --t 16 --values 1)
lab_test(bad_input.10.values_not_softcap cpu 2 MATCH "^bad input: --values runs pitfall 10 on soft caps"
         COMMAND ${S10} --cpu --t 16 --variant window --causal --window 4 --values 2)
lab_test(bad_input.10.d96 cpu 2 MATCH "^bad input: D=96 is not supported by 10_flex" COMMAND ${S10} --d 96)
# Every CPU case of tests/cases/10_flex.json passes, bad inputs are refused, the stub fails cleanly.
if(LAB_BUILD_SOLUTIONS)  # the solution's case list
  lab_test(cpu_eager.10.cases cpu 0 MATCH "passed, 0 failed" COMMAND ${CASES_PY} 10_flex --cpu)
endif()
# Pitfall 10 on the CPU, compiled with Inductor as on a GPU: the captured float compiles once per
# value, the captured tensor once (torch._dynamo's counters), with Dynamo's recompile limit set below
# the number of values (the section raises it for the demo).
if(LAB_BUILD_SOLUTIONS)  # it runs solutions/10_flex.py, absent from a student release
  add_test(NAME cpu_inductor.10.pitfall_counts COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_flex_pitfall.py)
  set_tests_properties(cpu_inductor.10.pitfall_counts PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 900)
  # A wrong mask_mod or score_mod (a window one key too wide, a position without the shift, a soft cap
  # without /cap) is named by the first (q_idx, kv_idx) where it differs from the reference's; the
  # solution passes; the stub keeps its own words (tests/test_flex_pitfall.py's ExerciseProbes).
  add_test(NAME cpu_eager.10.exercise_probes COMMAND ${Python3_EXECUTABLE} -m unittest test_flex_pitfall.ExerciseProbes
           WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
  set_tests_properties(cpu_eager.10.exercise_probes PROPERTIES LABELS cpu TIMEOUT 600)
  # --against-07: 07's window kernel on the same problem, its record joining 10's as variant 07-window.
  add_test(NAME cpu_eager.10.against_07_record COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_flex_against07.py ${CMAKE_BINARY_DIR})
  set_tests_properties(cpu_eager.10.against_07_record PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
# The stub fails each variant in its own words (scripts/lab check 10 folds only equal verdicts).
set(L10 ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/labs/10_flex.py)
lab_test(bad_input.10.docs_over_t_kv_stub cpu 2 MATCH "^bad input: --docs must be <= T_kv \\(80 here\\)"
         COMMAND ${L10} --cpu --variant document --docs 81 --t 100 --t-kv 80)
lab_test(cpu_eager.10.stub_names_its_exercise cpu 1 MATCH "^  check    EXERCISE alibi is not written yet: make_score_mod\\(\\)"
         "output not written" COMMAND ${L10} --cpu --variant alibi --t 16 --h 2)
lab_test(no_gpu.10.exit_77_or_pass cpu "77;0" MATCH "^cannot run here:|^PASS: 10_flex" COMMAND ${S10} --t 65 --iters 0)
if(LAB_BUILD_SOLUTIONS)  # the solution's case list
  lab_test(gpu.10_flex.cases gpu 0 MATCH "passed, 0 failed" COMMAND ${CASES_PY} 10_flex)
endif()
