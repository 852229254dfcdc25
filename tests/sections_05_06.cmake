# Sections 05 decode and 06 paged: their exercises' unit tests (the programs: exercise_programs.cmake;
# the solution's must pass, a stub lab's must fail), and the no-GPU truth of the stubs.
# A group counts the same checks whether they pass or fail (the stub's total is the solution's: 38
# for 05, 24 for 06), and a number prints as the harness prints it: NaN, never printf's "nan".
foreach(pair 05_decode:38 06_paged:24)
  string(REPLACE ":" ";" parts ${pair})
  list(GET parts 0 sec)
  list(GET parts 1 checks)
  if(TARGET exercises_${sec})
    lab_test(exercises.${sec}.solution cpu 0 MATCH "^PASS: 0 of ${checks} checks failed$" COMMAND ${BIN}/exercises_${sec})
  endif()
  if(TARGET lab_exercises_${sec})
    # A stub that passed these would tell a student their empty lab is right.
    lab_test(exercises.${sec}.stub_fails cpu 1 MATCH "^FAIL: [1-9][0-9]* of ${checks} checks failed$"
             COMMAND ${BIN}/lab_exercises_${sec})
  endif()
endforeach()
if(TARGET lab_exercises_05_decode)
  lab_test(exercises.05_decode.stub_count_and_nan cpu 1
           MATCH "^exercise gqa: 3 of 3 checks failed"
                 "merged_lse\\(\\{2, 1, -inf\\}, n=3, stride=1\\) = NaN, want" "(?s)\\A(?!.*\\bnan\\b)"
           COMMAND ${BIN}/lab_exercises_05_decode)
endif()
if(TARGET lab_exercises_06_paged)
  # Every allocator operation is reported on its own: a wrong append_tokens does not hide free_sequence.
  lab_test(exercises.06_paged.stub_reports_each_operation cpu 1
           MATCH "allocator: free_sequence\\(a, s\\) on 40 tokens"
                 "allocator: fork_prefix\\(a, prompt, 40\\)"
           COMMAND ${BIN}/lab_exercises_06_paged)
endif()

# Without a GPU the stub's CPU model runs the student's code: an untouched stub fails, every variant.
set(DEC_SHAPE --t 1 --t-kv 300 --b 3 --h 8 --h-kv 2)
foreach(v single split)
  lab_test(cpu_model.05.stub_fails_${v} cpu 1 MATCH "FAIL" COMMAND ${BIN}/lab_05_decode --cpu --variant ${v} ${DEC_SHAPE})
  lab_test(cpu_model.06.stub_fails_${v} cpu 1 MATCH "FAIL" COMMAND ${BIN}/lab_06_paged --cpu --variant ${v} ${DEC_SHAPE})
  foreach(layout nhd hnd)
    lab_test(cpu_model.06.stub_fails_${v}_${layout} cpu 1 MATCH "FAIL"
             COMMAND ${BIN}/lab_06_paged --cpu --variant ${v} --kv-layout ${layout} ${DEC_SHAPE})
  endforeach()
  # The bug branches are given code: they run on the stub's build too (and fail, as a stub does).
  lab_test(cpu_model.05.stub_bug_gqa_${v} cpu 1 MATCH "FAIL" COMMAND ${BIN}/lab_05_decode --cpu --variant ${v} --bug gqa-index ${DEC_SHAPE})
  # 06 reads both pool layouts; a pool handed to a kernel built for the other layout is refused on
  # the host (shape/stride assertion), and caught by the check when that assertion is skipped.
  foreach(layout nhd hnd)
    lab_test(cpu_model.06.${v}_${layout} cpu 0 MATCH "PASS" "page size 16 tokens, ${layout} pool"
             COMMAND ${BIN}/06_paged --cpu --variant ${v} --kv-layout ${layout} ${DEC_SHAPE})
    lab_test(bad_input.06.kv_layout_bug_${v}_${layout} cpu 2 MATCH "^bad input: the pool is written ${layout} .* but the kernel reads"
             COMMAND ${BIN}/06_paged --cpu --variant ${v} --kv-layout ${layout} --bug kv-layout ${DEC_SHAPE})
    if(LAB_BUILD_SOLUTIONS)  # the solution's build
      add_test(NAME cpu_model.06.kv_layout_bug_caught_${v}_${layout}
               COMMAND ${EXPECT} --code 1 --match=FAIL --skip-code 77 --
                       ${BIN}/06_paged --cpu --variant ${v} --kv-layout ${layout} --bug kv-layout ${DEC_SHAPE})
      set_tests_properties(cpu_model.06.kv_layout_bug_caught_${v}_${layout} PROPERTIES LABELS cpu SKIP_RETURN_CODE 77
                           ENVIRONMENT "LAB_UNCHECKED_TABLES=1")
    endif()
  endforeach()
endforeach()
# The memory line names only what a run adds: single keeps no split partials, split does.
lab_test(memory.05.single_adds_nothing cpu 0 MATCH "^  memory   nothing on top of Q, K, V, O's [0-9.]+ [KMG]?B$"
         COMMAND ${BIN}/05_decode --cpu --variant single ${DEC_SHAPE})
lab_test(memory.05.split_names_its_partials cpu 0
         MATCH "^  memory   [0-9.]+ [KMG]?B partial O and LSE of the splits, on top of Q, K, V, O's [0-9.]+ [KMG]?B$"
         COMMAND ${BIN}/05_decode --cpu --variant split --splits 7 ${DEC_SHAPE})
lab_test(bad_input.06.kv_layout_value cpu 2 MATCH "^bad input: --kv-layout must be nhd or hnd" COMMAND ${BIN}/06_paged --kv-layout xyz)
lab_test(help.06.shows_own_options cpu 0 MATCH "--kv-layout" "--simulate" COMMAND ${BIN}/06_paged --help)
lab_test(simulate.06.stub_fails cpu 1 MATCH "^FAIL: simulate_serving" COMMAND ${BIN}/lab_06_paged --simulate --requests 50)
# The allocator's two edges that the simulation's own traffic never reaches at its defaults (a
# 512-token prefix fills whole blocks at every block size; the pool is sized for the worst case):
# --simulate asks them first, so an allocator that passes it is right there too.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_fork_partial_06 06_paged "const int full = prefix_tokens / a.block_size();"
                   "const int full = lab::ceil_div(prefix_tokens, a.block_size());")
  lab_test(simulate.06.fork_shares_a_partial_block cpu 1
           MATCH "^FAIL: simulate_serving: fork_prefix gave 32 tokens in 2 blocks of a 25-token prefix at block size 16"
           COMMAND ${BIN}/wrong_fork_partial_06 --simulate --requests 50)
  lab_wrong_answer(wrong_append_partial_06 06_paged "  if (need > a.free_blocks()) return false;
  for (int i = 0; i < need; ++i) s.blocks.push_back(a.allocate());" "  for (int i = 0; i < need; ++i) {
    const int block = a.allocate();
    if (block < 0) return false;
    s.blocks.push_back(block);
  }")
  # A page index one too far reads the next table entry (-1 past a short sequence's last block,
  # past the tables after the last sequence's): the CPU model names the address instead of crashing.
  lab_wrong_answer(wrong_page_index_06 06_paged "block_table[int64_t(b) * table_stride + j / page_size]"
                   "block_table[int64_t(b) * table_stride + (j + 1) / page_size]")
  lab_test(cpu_model.06.address_past_the_pool cpu 1
           MATCH "^  check    kv_row_offset\\(b=1, j=[0-9]+, kv_head=[0-9]+\\) = [0-9]+, outside the pool of [0-9]+ elements .*, from the guard entry past the block table's end"
           COMMAND ${BIN}/wrong_page_index_06 --cpu --t 1 --t-kv 1024 --kv-lens full --b 2 --h 8 --h-kv 2)
  lab_test(cpu_model.06.address_before_the_pool cpu 1
           MATCH "^  check    kv_row_offset\\(b=[0-9]+, j=[0-9]+, kv_head=[0-9]+\\) = -[0-9]+, outside the pool .*from a table entry of -1"
           COMMAND ${BIN}/wrong_page_index_06 --cpu --t 1 --t-kv 1000 --b 8 --h 8 --h-kv 2 --seed 2)  # a length of whole pages
  lab_test(simulate.06.append_all_or_none cpu 1
           MATCH "^FAIL: simulate_serving: append_tokens of [0-9]+ blocks' tokens with [0-9]+ free must return false and take nothing"
           COMMAND ${BIN}/wrong_append_partial_06 --simulate --requests 50)
endif()
# GPU: the layout bug with the host check skipped is caught by the self-check; hnd passes.
foreach(v single split)
  lab_test(gpu.06_paged.hnd_${v} gpu 0 MATCH "PASS" COMMAND ${BIN}/06_paged --variant ${v} --kv-layout hnd --t 1 --t-kv 1000 --h 32 --h-kv 8 --iters 0)
  if(LAB_BUILD_SOLUTIONS)  # the solution's build
    add_test(NAME gpu.06_paged.kv_layout_bug_caught_${v}
             COMMAND ${EXPECT} --code 1 --match=FAIL --skip-code 77 --
                     ${BIN}/06_paged --variant ${v} --bug kv-layout --t 1 --t-kv 1000 --h 32 --h-kv 8 --iters 0)
    set_tests_properties(gpu.06_paged.kv_layout_bug_caught_${v} PROPERTIES LABELS gpu SKIP_RETURN_CODE 77
                         ENVIRONMENT "LAB_UNCHECKED_TABLES=1")
  endif()
endforeach()

# 06 runs 05's hooks: while labs/05_decode.cu is the stub, a 06 run names them (its own output is
# "not written" either way, which would point at 06's exercise).
add_test(NAME cpu_model.06.names_unwritten_05_hooks
         COMMAND ${EXPECT} --stub ${LAB_LABS_DIR}/05_decode.cu --code 1
                 "--match=05's exercises gqa split-state split-merge are still stubs in labs/05_decode.cu"
                 --skip-code 77 -- ${BIN}/lab_06_paged --cpu --t 1 --t-kv 300 --b 2 --h 4 --h-kv 2)
set_tests_properties(cpu_model.06.names_unwritten_05_hooks PROPERTIES LABELS cpu SKIP_RETURN_CODE 77
                     ENVIRONMENT "LAB_NO_BUILD=1;LAB_BUILD_DIR=${CMAKE_BINARY_DIR}")

# A wrong GQA mapping is refused before anything runs, by name, with exit 1: a head past H would be
# written past the end of O (on the CPU a corrupted heap, a crash with no word about the exercise).
# The solution rebuilt with three wrong host mappings (LAB_WRONG_GQA picks one; the kernels keep
# the right one), run on the CPU model.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_gqa_05 05_decode "return kv_head * group + r;" "
#ifdef __CUDA_ARCH__
    return kv_head * group + r;
#else
    return wrong_gqa(kv_head, r, group);
#endif
" PREFIX "#include \"${CMAKE_CURRENT_SOURCE_DIR}/wrong_gqa.h\"
")
  foreach(v single split)
    lab_wrong_answer_tests(precheck.05.gqa_${v} ${BIN}/wrong_gqa_05 LAB_WRONG_GQA
      MODES right range group twice
      SAID "^PASS"
           "EXERCISE gqa: query_head_of\\(kv_head=0, r=0, group=4\\) = 1000, not a query head \\(H = 8\\)"
           "EXERCISE gqa: query_head_of\\(kv_head=0, r=1, group=4\\) = 4, but query head 4 reads K/V head 1"
           "EXERCISE gqa: query_head_of\\(kv_head=0, r=1, group=4\\) = 0, the head row r=0 already has"
      ARGS --cpu --variant ${v} ${DEC_SHAPE})
  endforeach()
endif()

# A merged_lse without its all-empty guard: the warps of a block that saw no key (every warp of a
# row that sees no key) give -inf - -inf = NaN for its LSE. The check names those rows as a NaN
# computed, not as the poison left in place, and says where such a NaN comes from.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_merged_lse_05 05_decode "if (hi == -INFINITY) return -INFINITY;  // every part empty"
                   "/* no all-empty guard */")
  lab_test(cpu_model.05.merged_lse_nan_split cpu 1
           MATCH "^  check    LSE is NaN on [0-9]+ of 32 rows checked \\(first: LSE\\[b=[0-9], h=[0-9], i=0\\]\\), with O within its bound: a NaN computed, not the poison left in place; look for -inf - -inf"
                 "(?s)\\A(?!.*not written)"
           COMMAND ${BIN}/wrong_merged_lse_05 --cpu --variant split --splits 7 --t 1 --t-kv 448 --b 4 --h 8 --h-kv 2)
  lab_test(cpu_model.05.merged_lse_right cpu 0 MATCH "PASS"
           COMMAND ${BIN}/05_decode --cpu --variant split --splits 7 --t 1 --t-kv 448 --b 4 --h 8 --h-kv 2)
  lab_test(cpu_model.05.merged_lse_nan_no_key cpu 1
           MATCH "^  check    LSE is NaN on [0-9]+ rows, all rows that see no key \\(first: LSE\\[b=[0-9], h=[0-9], i=[0-9]+\\]\\), with O within its bound"
                 "(?s)\\A(?!.*not written)"
           COMMAND ${BIN}/wrong_merged_lse_05 --cpu --variant single --t 67 --t-kv 131 --causal --h 2 --b 4)
endif()

# A fork_prefix that shares blocks without retaining them makes the allocator throw when the
# sequences are freed: the exercises' program names the test and the error, and goes on to the
# others and its summary (an uncaught exception would abort it before either).
if(LAB_BUILD_SOLUTIONS)
  file(READ ${PROJECT_SOURCE_DIR}/solutions/06_paged.cu paged_text)
  string(REPLACE "    a.retain(parent.blocks[size_t(i)]);\n" "" wrong_fork_text "${paged_text}")
  if(wrong_fork_text STREQUAL paged_text)
    message(FATAL_ERROR "solutions/06_paged.cu: no retain in fork_prefix for the wrong-fork test to remove")
  endif()
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/wrong_fork_06.cu "${wrong_fork_text}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/solutions/06_paged.cu)
  add_executable(wrong_fork_exercises_06 ${CMAKE_CURRENT_SOURCE_DIR}/test_decode_exercises.cu)
  target_include_directories(wrong_fork_exercises_06 PRIVATE ${PROJECT_SOURCE_DIR}/solutions)  # its 05_decode.cu
  target_link_libraries(wrong_fork_exercises_06 PRIVATE lab_common)
  target_compile_definitions(wrong_fork_exercises_06 PRIVATE LAB_EXERCISE_SECTION=6
                             LAB_EXERCISE_SOURCE="${CMAKE_CURRENT_BINARY_DIR}/wrong_fork_06.cu")
  target_compile_options(wrong_fork_exercises_06 PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${LAB_CUDA_FLAGS}>)
  list(GET LAB_CUDA_ARCHITECTURES 0 arch)
  set_target_properties(wrong_fork_exercises_06 PROPERTIES CUDA_ARCHITECTURES ${arch})
  add_test(NAME exercises.06.fork_without_retain_named
           COMMAND ${EXPECT} --code 1
                   "--match=stopped with an error: BlockAllocator::release: block [0-9]+ is already free"
                   "--match=^exercise allocator: [0-9]+ of [0-9]+ checks failed"
                   "--match=^exercise block-table: its [0-9]+ checks pass"
                   -- ${BIN}/wrong_fork_exercises_06)
  set_tests_properties(exercises.06.fork_without_retain_named PROPERTIES LABELS cpu)
endif()
