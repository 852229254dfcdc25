# ---- section 12 ring attention: shards, the ring schedule, the LSE merge -------------------------
# (included by tests/CMakeLists.txt; the section's programs are added by the top-level CMakeLists.txt.
# The case list runs on the CPU model by itself: driver.check_12_cpu_model.)
set(RING ${BIN}/12_ring)
set(RING_SHAPE --t 264 --h 4 --h-kv 2 --causal)  # T_local 66 at N=4 (a ragged key tile), GQA
lab_test(bad_input.12.t_not_multiple cpu 2 MATCH "^bad input: T=130 is not a multiple of 4" COMMAND ${RING} --t 130)
lab_test(bad_input.12.zigzag_unit cpu 2 MATCH "^bad input: T=260 is not a multiple of 8 \\(the zigzag layout"
         COMMAND ${RING} --t 260 --layout zigzag)
lab_test(bad_input.12.too_many_ranks cpu 2 MATCH "^bad input: --ranks 8 with the zigzag layout needs T >= 16"
         COMMAND ${RING} --t 8 --ranks 8 --layout zigzag)
lab_test(bad_input.12.t_kv cpu 2 MATCH "^bad input: ring attention shards Q and K/V alike" COMMAND ${RING} --t 256 --t-kv 512)
lab_test(bad_input.12.ranks0 cpu 2 MATCH "^bad input: --ranks must be an integer" COMMAND ${RING} --ranks 0)
lab_test(bad_input.12.ranks_no_value cpu 2 MATCH "^bad input: --ranks needs a value" COMMAND ${RING} --ranks --cpu)
lab_test(bad_input.12.layout_twice cpu 2 MATCH "^bad input: --layout is given more than once"
         COMMAND ${RING} --cpu --layout zigzag --layout contiguous)
lab_test(bad_input.12.layout cpu 2 MATCH "^bad input: --layout must be contiguous or zigzag" COMMAND ${RING} --layout striped)
foreach(layout contiguous zigzag)
  foreach(n 2 3 4 8)
    math(EXPR t "${n} * 2 * 33")  # chunks of 33 rows: tiles cross chunk and shard edges
    lab_test(cpu_model.12.${layout}_n${n}_causal cpu 0 MATCH "PASS" COMMAND ${RING} --cpu --ranks ${n} --layout ${layout} --t ${t} --h 2 --h-kv 1 --causal)
  endforeach()
  lab_test(cpu_model.12.${layout}_noncausal_fp16_d64 cpu 0 MATCH "PASS"
           COMMAND ${RING} --cpu --layout ${layout} --t 264 --h 4 --h-kv 2 --d 64 --dtype fp16)
endforeach()
# The work model: zigzag balances the causal work exactly; contiguous gives the last rank N tiles
# of diagonal work per first rank's one (T_local = 64: one tile a pair).
# The ring line belongs to the CPU model's banner: printed under it.
lab_test(cpu_model.12.zigzag_balanced cpu 0 MATCH "^== CPU model of 12_ring.*==\nring: 4 ranks, zigzag layout, T_local [0-9]+; tiles per rank 4 4 4 4 \\(max/mean 1.00\\)" "PASS"
         COMMAND ${RING} --cpu --layout zigzag --t 256 --h 1 --causal)
lab_test(cpu_model.12.contiguous_unbalanced cpu 0 MATCH "tiles per rank 1 2 3 4 \\(max/mean 1.60\\)" "PASS"
         COMMAND ${RING} --cpu --layout contiguous --t 256 --h 1 --causal)
# Each pitfall is caught.
lab_test(cpu_model.12.bug_no_merge_rescale cpu 1 MATCH "FAIL" "too far from fp64" COMMAND ${RING} --cpu --bug no-merge-rescale ${RING_SHAPE})
lab_test(cpu_model.12.bug_local_causal cpu 1 MATCH "FAIL" "too far from fp64" COMMAND ${RING} --cpu --bug local-causal ${RING_SHAPE} --layout zigzag)
# The stub fails cleanly without a GPU: its CPU model runs the student's (unwritten) shard map.
lab_test(cpu_model.12.stub_not_written cpu 1 MATCH "FAIL" "output not written" COMMAND ${BIN}/lab_12_ring --cpu ${RING_SHAPE})
# The record carries the ring's metrics.
if(LAB_BUILD_SOLUTIONS)  # a record of the solution
  add_test(NAME record.12.clean COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_CURRENT_BINARY_DIR}/record_12.json)
  add_test(NAME record.12.run COMMAND ${RING} --cpu --t 512 --h 2 --causal --layout zigzag --json ${CMAKE_CURRENT_BINARY_DIR}/record_12.json --quiet)
  add_test(NAME record.12.validate COMMAND ${Python3_EXECUTABLE} -c
           "import json,sys; r=json.load(open(sys.argv[1]))[-1]; m=r['metrics']; assert m['ranks']==4 and m['layout']=='zigzag' and m['work_max_over_mean']==1.0 and len(m['tiles_per_rank'])==4 and m['kv_bytes_per_rank']>0, m; print('ok')"
           ${CMAKE_CURRENT_BINARY_DIR}/record_12.json)
  set_tests_properties(record.12.clean PROPERTIES FIXTURES_SETUP rec12_clean LABELS cpu)
  set_tests_properties(record.12.run PROPERTIES FIXTURES_REQUIRED rec12_clean FIXTURES_SETUP rec12_file LABELS cpu)
  set_tests_properties(record.12.validate PROPERTIES FIXTURES_REQUIRED rec12_file LABELS cpu PASS_REGULAR_EXPRESSION "^ok")
endif()
# --transport nccl: without NCCL in the build, or without a GPU, one line and exit 77; with more
# ranks than GPUs, bad input before any NCCL call.
lab_test(no_gpu.12.nccl_cannot_run cpu "77;2" MATCH "built without NCCL|no CUDA GPU|runs one rank per GPU"
         COMMAND ${RING} --transport nccl --ranks 64 --t 256)

# GPU: the case list passes, the stub fails cleanly, the bugs are caught (the section is added after
# the generic loop of tests/CMakeLists.txt, so its GPU tests are here); NCCL on one GPU (one rank,
# no pass) runs the same setup, streams and gather as on eight.
lab_test(gpu.12_ring.check_solution gpu 0 MATCH " 0 failed" COMMAND ${LAB} check 12 --solution --require-gpu)
lab_test(gpu.12_ring.check_stub_fails_cleanly gpu 0 MATCH " 0 failed" COMMAND ${LAB} check 12 --expect-fail --require-gpu)
lab_test(gpu.12_ring.stub_fails gpu 1 MATCH "FAIL" "not written|NaN or inf|too far from fp64" COMMAND ${BIN}/lab_12_ring --t 256 --iters 0)
lab_test(gpu.12_ring.nccl_one_rank gpu 0 MATCH "PASS" COMMAND ${CMAKE_COMMAND} -E env CUDA_VISIBLE_DEVICES=0 ${RING} --transport nccl --ranks 1 --causal --t 1024 --iters 0)

# The exercises' unit tests (the programs: exercise_programs.cmake): the solution's must pass, a stub
# lab's must fail: the shard map, the schedule and the merge, on any machine.
if(TARGET exercises_12_ring)
  lab_test(exercises.12.solution cpu 0 MATCH "^PASS: 0 of" COMMAND ${BIN}/exercises_12_ring)
endif()
if(TARGET lab_exercises_12_ring)
  lab_test(exercises.12.stub_fails cpu 1 MATCH "^FAIL: [1-9]" COMMAND ${BIN}/lab_exercises_12_ring)
endif()
# A record's command reruns its run: the ring's own options (parsed before the harness) are in it.
if(LAB_BUILD_SOLUTIONS)  # (the solution's program: a student release has none)
  add_test(NAME record.12.command_holds_the_ring_options
           COMMAND ${Python3_EXECUTABLE} -c "import json, subprocess, sys, tempfile, os
path = os.path.join(tempfile.mkdtemp(), 'r.json')
subprocess.run([sys.argv[1], '--cpu', '--t', '128', '--h', '2', '--ranks', '2', '--layout', 'zigzag', '--json', path], check=True, capture_output=True)
command = json.load(open(path))[-1]['command']
sys.exit(0 if command.endswith(' --ranks 2 --layout zigzag --transport local') else 'command lacks the ring options: ' + command)"
           ${RING})
  set_tests_properties(record.12.command_holds_the_ring_options PROPERTIES LABELS cpu)
endif()

# A ring schedule turned the wrong way (block_at(r, s) = r + s: blocks passed to rank - 1), or one
# that takes % of a negative number (-1 at rank 0, step 1), is refused before anything runs, by
# name, with exit 1: the CPU model alone, which reads any block it names, passes the first and
# skips the -1 pairs of the second. The solution rebuilt with LAB_WRONG_RING's block_at (the
# kernels keep the right one), on the CPU model.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_ring_12 12_ring
                   "LAB_HD int block_at(int rank, int step, int ranks) { return ((rank - step) % ranks + ranks) % ranks; }"
                   "LAB_HD int block_at(int rank, int step, int ranks) {
#ifdef __CUDA_ARCH__
  return ((rank - step) % ranks + ranks) % ranks;
#else
  return wrong_block_at(rank, step, ranks);
#endif
}" PREFIX "#include \"${CMAKE_CURRENT_SOURCE_DIR}/wrong_ring.h\"
")
  lab_wrong_answer_tests(precheck.12.ring ${BIN}/wrong_ring_12 LAB_WRONG_RING
    MODES right turn sign
    SAID "^PASS"
         "EXERCISE shard-map: block_at\\(rank=0, step=1, n=4\\) = 1, want 3: what rank 3 held at step 0"
         "EXERCISE shard-map: block_at\\(rank=0, step=1, n=4\\) = -1, want 3: .*add n before taking it"
    ARGS --cpu ${RING_SHAPE})
endif()

# A merge_rows without its both-empty guard (two -inf LSEs: NaN weights) is refused before anything
# runs, by name, with exit 1, on the CPU model as on a GPU: no run of this program merges two empty
# states (every row's first partial is its own block, which holds its own key), so its output alone
# passes every case with such a merge. The solution rebuilt without the guard, on the CPU model.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_ring_merge_12 12_ring "  if (hi == -INFINITY) return {1.f, 0.f, -INFINITY};  // both empty: never -inf - -inf"
                   "  /* no both-empty guard */")
  lab_test(precheck.12.merge_both_empty cpu 1
           MATCH "EXERCISE ring-merge: merge_rows\\(lse_run=-inf, lse_part=-inf\\) = \\{w_run NaN, w_part NaN, lse NaN\\}, want \\{w_run 1, w_part 0, lse -inf\\}"
                 "FAIL"
           COMMAND ${BIN}/wrong_ring_merge_12 --cpu ${RING_SHAPE})
  lab_test(gpu.12_ring.merge_both_empty gpu 1
           MATCH "EXERCISE ring-merge: merge_rows\\(lse_run=-inf, lse_part=-inf\\)" "FAIL"
           COMMAND ${BIN}/wrong_ring_merge_12 --t 256 --iters 0)
endif()
