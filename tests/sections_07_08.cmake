# Sections 07 (sliding window) and 08 (Hopper ring): what the no-GPU path must say, the lesson's
# default run, the --consumers option, the windowed overlap loop and chunked prefill.
set(W07 ${BIN}/07_sliding_window)
set(L07 ${BIN}/lab_07_sliding_window)
set(S08 ${BIN}/08_tma_skeleton)
set(L08 ${BIN}/lab_08_tma_skeleton)

# An untouched stub never passes on the CPU: 07's CPU model runs the student's span and mask (exit
# 1); 08's checks ring_slot() on the host and fails (exit 1), and could say only "needs a GPU" (77).
foreach(args "" "--variant window-mma --t 256 --h 1 --causal --window 66" "--variant full --t 300 --causal --window 65"
        "--t 300 --t-kv 100 --causal --window 37 --d 128" "--t 200 --causal --window 37 --bug inverted-window")
  string(MAKE_C_IDENTIFIER "x${args}" id)
  separate_arguments(argv UNIX_COMMAND "${args}")
  lab_test(no_gpu.07_sliding_window.stub_never_passes${id} cpu 1 MATCH "FAIL: 07_sliding_window" COMMAND ${L07} --cpu ${argv})
endforeach()
foreach(args "" "--variant ws-overlap --t 300 --causal --window 65 --h 2" "--consumers 1 --t 200 --h 2"
        "--variant paged --page-size 64 --t 200 --causal --h 2" "--variant paged-pool --t 64 --t-kv 700 --causal --h 2")
  string(MAKE_C_IDENTIFIER "x${args}" id)
  separate_arguments(argv UNIX_COMMAND "${args}")
  lab_test(no_gpu.08_tma_skeleton.stub_never_passes${id} cpu "1;77" MATCH "FAIL: 08_tma_skeleton|^not checked here: needs a GPU"
           COMMAND ${L08} --cpu ${argv})
endforeach()

# 08's protocol filled in, built as a student's build: the CPU can check only ring_slot(), so it
# says "needs a GPU" and exits 77 (never PASS). The test wants exactly 77, so it runs as `cpu`.
# (A student release has no solutions/: nothing to fill the stub with there.)
if(EXISTS ${PROJECT_SOURCE_DIR}/solutions/08_tma_skeleton.cu)
  add_executable(lab_08_tma_skeleton_filled ${PROJECT_SOURCE_DIR}/solutions/08_tma_skeleton.cu)
  target_link_libraries(lab_08_tma_skeleton_filled PRIVATE lab_common)
  target_compile_options(lab_08_tma_skeleton_filled PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${LAB_CUDA_FLAGS}>)
  target_compile_definitions(lab_08_tma_skeleton_filled PRIVATE LAB_BUILD_KIND="lab")
  set_target_properties(lab_08_tma_skeleton_filled PROPERTIES CUDA_ARCHITECTURES 90a)
  add_test(NAME no_gpu.08_tma_skeleton.filled_stub_needs_a_gpu
           COMMAND ${EXPECT} --code 77 "--match=^not checked here: needs a GPU: ring_slot\\(\\) passed its host check"
                   -- ${BIN}/lab_08_tma_skeleton_filled --cpu --t 200 --t-kv 333 --causal --h 4 --h-kv 2)
  set_tests_properties(no_gpu.08_tma_skeleton.filled_stub_needs_a_gpu PROPERTIES LABELS cpu TIMEOUT 300)
endif()

# The solutions' CPU models pass (what a filled 07 stub does too: 07's exercises run on the host).
lab_test(cpu_model.07_sliding_window.default_run_shows_the_lesson cpu 0 MATCH "causal window=512" "visited 456 of 1408 K/V tiles \\(67.6% skipped\\)" "PASS"
         COMMAND ${W07} --cpu)
lab_test(cpu_model.07_sliding_window.causal_alone_is_plain_causal cpu 0 MATCH "T=512 D=64 fp16 causal$" "PASS" COMMAND ${W07} --cpu --causal --t 512 --h 2)
lab_test(cpu_model.07_sliding_window.decode_step_bottom_right cpu 0 MATCH "PASS" COMMAND ${W07} --cpu --t 1 --t-kv 1000 --causal --window 10 --h 2)
lab_test(cpu_model.08_tma_skeleton.overlap_window cpu 0 MATCH "PASS" COMMAND ${S08} --cpu --variant ws-overlap --t 300 --causal --window 65 --h 2)
lab_test(cpu_model.08_tma_skeleton.consumers1 cpu 0 MATCH "PASS" COMMAND ${S08} --cpu --consumers 1 --t 300 --causal --h 2)
# The memory line names what the variant adds, and the CPU model says what a GPU run holds (not
# its own fp32 copies of the pool, twice that): the 16-bit pool of 5 blocks of 64 keys and its 10
# maps here, the fp8 copies for fp8 (Q8, K8, Vᵀ8 of 208 keys, and 48 bytes of amax and scales).
lab_test(cpu_model.08_tma_skeleton.paged_prints_page_size cpu 0 MATCH "paged K/V, page size 64" "PASS"
         "^  memory   329 KB paged pool and page maps, on top of Q, K, V, O's"
         COMMAND ${S08} --cpu --variant paged --t 200 --causal --h 2)
lab_test(cpu_model.08_tma_skeleton.fp8_memory_is_the_gpu_runs cpu 0 MATCH "PASS"
         "^  memory   156 KB fp8 copies of Q, K and V \\(V transposed\\) and their scales, on top of"
         COMMAND ${S08} --cpu --variant fp8 --t 200 --causal --h 2)
lab_test(cpu_model.08_tma_skeleton.chunked_prefill cpu 0 MATCH "page size 64" "PASS"
         COMMAND ${S08} --cpu --variant paged-pool --page-size 64 --t 64 --t-kv 700 --causal --h 2)
lab_test(bad_input.08_tma_skeleton.consumers4 cpu 2 MATCH "^bad input: --consumers 4 is not supported \\(1, 2, 3\\)" COMMAND ${S08} --consumers 4)
lab_test(bad_input.08_tma_skeleton.consumers3_d128 cpu 2 MATCH "^bad input: --consumers 3 applies to --variant ws, ws-overlap, ws-pingpong and ws-persistent at --d 64"
         COMMAND ${S08} --consumers 3 --variant ws-pingpong --d 128)
lab_test(bad_input.08_tma_skeleton.pingpong_one_consumer cpu 2 MATCH "^bad input: --consumers 1 with --variant ws-pingpong"
         COMMAND ${S08} --consumers 1 --variant ws-pingpong)
lab_test(cpu_model.08_tma_skeleton.pingpong_192_rows cpu 0 MATCH "PASS" COMMAND ${S08} --cpu --variant ws-pingpong --d 64 --t 300 --t-kv 200 --causal --h 2)
lab_test(bad_input.08_tma_skeleton.persistent_one_consumer cpu 2 MATCH "^bad input: --consumers 1 with --variant ws-persistent"
         COMMAND ${S08} --consumers 1 --variant ws-persistent)
lab_test(cpu_model.08_tma_skeleton.persistent cpu 0 MATCH "PASS"
         COMMAND ${S08} --cpu --variant ws-persistent --t 300 --t-kv 200 --causal --h 4 --h-kv 2)
lab_test(bad_input.08_tma_skeleton.consumers1_paged cpu 2 MATCH "^bad input: --consumers 1 applies to --variant ws and ws-overlap"
         COMMAND ${S08} --consumers 1 --variant paged)
# ws-pingpong's K/V tile: 128 keys, or FlashAttention-3's 176 at D = 128 with --kv-tile 176 (the
# CPU model walks the same tiles: ragged last tile, GQA, T_q != T_kv), and the option's refusals.
lab_test(cpu_model.08_tma_skeleton.pingpong_176_keys cpu 0 MATCH "PASS"
         COMMAND ${S08} --cpu --variant ws-pingpong --kv-tile 176 --t 300 --t-kv 353 --h 4 --h-kv 2)
lab_test(cpu_model.08_tma_skeleton.pingpong_176_keys_causal_window cpu 0 MATCH "PASS"
         COMMAND ${S08} --cpu --variant ws-pingpong --kv-tile 176 --t 400 --t-kv 500 --causal --window 200 --h 2)
lab_test(cpu_model.08_tma_skeleton.pingpong_kv_tile_128 cpu 0 MATCH "PASS"
         COMMAND ${S08} --cpu --variant ws-pingpong --kv-tile 128 --t 300 --t-kv 353 --h 2)
lab_test(bad_input.08_tma_skeleton.kv_tile64 cpu 2 MATCH "^bad input: --kv-tile 64 is not supported \\(128, 176\\)"
         COMMAND ${S08} --kv-tile 64 --variant ws-pingpong)
lab_test(bad_input.08_tma_skeleton.kv_tile_ws cpu 2 MATCH "^bad input: --kv-tile applies to --variant ws-pingpong of 08_tma_skeleton, not to ws"
         COMMAND ${S08} --kv-tile 176)
lab_test(bad_input.08_tma_skeleton.kv_tile176_d64 cpu 2 MATCH "^bad input: --kv-tile 176 applies at --d 128"
         COMMAND ${S08} --kv-tile 176 --variant ws-pingpong --d 64)
lab_test(bad_input.07_sliding_window.kv_tile cpu 2 MATCH "^bad input: --kv-tile is not supported by 07_sliding_window"
         COMMAND ${W07} --kv-tile 128)
lab_test(bad_input.07_sliding_window.no_consumers_option cpu 2 MATCH "^bad input: " COMMAND ${W07} --consumers 1)

# On a GPU: 07's stub runs its Hopper variants only on section 08's protocol; with 08's stub beside
# it, it says so and runs the mma kernel (its own stub then fails: exit 1).
lab_test(gpu.07_sliding_window.stub_needs_08_protocol gpu 1 MATCH "needs section 08's ring protocol" "FAIL"
         COMMAND ${L07} --t 300 --causal --window 65 --iters 0)
# On a GPU: --consumers 1 and the windowed overlap loop pass their checks.
lab_test(gpu.08_tma_skeleton.consumers1 gpu 0 MATCH "PASS" COMMAND ${S08} --consumers 1 --t 1000 --causal --h 4 --h-kv 2 --iters 0)
lab_test(gpu.08_tma_skeleton.pingpong_d64 gpu 0 MATCH "PASS"
         COMMAND ${S08} --variant ws-pingpong --d 64 --t 1000 --t-kv 700 --causal --h 4 --h-kv 2 --iters 0)
lab_test(gpu.08_tma_skeleton.pingpong_d128_window gpu 0 MATCH "PASS"
         COMMAND ${S08} --variant ws-pingpong --t 1000 --causal --window 200 --h 2 --iters 0)
lab_test(gpu.08_tma_skeleton.overlap_window gpu 0 MATCH "PASS"
         COMMAND ${S08} --variant ws-overlap --t 1000 --causal --window 200 --h 2 --iters 0)

# 08's fp8 variant: the e4m3 conversion, the quantisation and the fp8 tolerance rule (host code).
target_sources(unit_tests PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/test_fp8.cpp)
# 08's fp8 variant: the CPU model (the kernel's arithmetic: e4m3 inputs, P in e4m3) passes the fp8
# rule, and a forgotten descale factor fails it; the options it refuses; the stub never passes.
lab_test(cpu_model.08_tma_skeleton.fp8 cpu 0 MATCH "max error .* <= bound" "PASS: 08_tma_skeleton fp8"
         COMMAND ${S08} --cpu --variant fp8 --t 200 --t-kv 333 --causal --h 4 --h-kv 2)
lab_test(cpu_model.08_tma_skeleton.fp8_d64_window cpu 0 MATCH "PASS" COMMAND ${S08} --cpu --variant fp8 --t 300 --causal --window 65 --h 2 --d 64)
lab_test(cpu_model.08_tma_skeleton.fp8_forget_descale_caught cpu 1 MATCH "O too far from fp64" "FAIL"
         COMMAND ${S08} --cpu --variant fp8 --t 300 --causal --h 2 --bug forget-descale)
lab_test(bad_input.08_tma_skeleton.fp8_paged cpu 2 MATCH "^bad input: --page-size applies to --variant paged and paged-pool"
         COMMAND ${S08} --variant fp8 --page-size 64 --t 64)
lab_test(bad_input.08_tma_skeleton.fp8_consumers1 cpu 2 MATCH "^bad input: --consumers 1 applies to --variant ws and ws-overlap"
         COMMAND ${S08} --variant fp8 --consumers 1 --t 64)
lab_test(bad_input.08_tma_skeleton.forget_descale_ws cpu 2 MATCH "^bad input: --bug forget-descale applies to --variant fp8"
         COMMAND ${S08} --bug forget-descale --t 64)
lab_test(bad_input.08_tma_skeleton.o_in_tensor_core_ws cpu 2 MATCH "^bad input: --bug o-in-tensor-core applies to --variant fp8"
         COMMAND ${S08} --bug o-in-tensor-core --t 64)
# The tensor core's short accumulator is the bug: the fp32 CPU model has none, and says so (77).
lab_test(cpu_model.08_tma_skeleton.o_in_tensor_core_needs_a_gpu cpu 77 MATCH "^not checked here: needs a GPU: --bug o-in-tensor-core"
         COMMAND ${S08} --cpu --variant fp8 --t 300 --h 2 --bug o-in-tensor-core)
lab_test(no_gpu.08_tma_skeleton.stub_never_passes_fp8 cpu "1;77" MATCH "FAIL: 08_tma_skeleton|^not checked here: needs a GPU"
         COMMAND ${L08} --cpu --variant fp8 --t 200 --h 2)
# On a GPU: the fp8 kernel passes its rule (D = 128 and 64) and the forgotten descale is caught.
lab_test(gpu.08_tma_skeleton.fp8 gpu 0 MATCH "PASS"
         "^  memory   [0-9.]+ [KMG]?B fp8 copies of Q, K and V \\(V transposed\\) and their scales, on top of" COMMAND ${S08} --variant fp8 --t 1000 --t-kv 1100 --causal --h 4 --h-kv 2 --iters 0)
lab_test(gpu.08_tma_skeleton.fp8_d64 gpu 0 MATCH "PASS" COMMAND ${S08} --variant fp8 --t 700 --d 64 --h 2 --iters 0)
# A long row of K/V tiles (40), where O summed inside the fp8 tensor core's shorter accumulator
# would lose precision: the kernel adds each tile's P V to O in fp32 registers.
lab_test(gpu.08_tma_skeleton.fp8_long_kv gpu 0 MATCH "PASS"
         COMMAND ${S08} --variant fp8 --t 1000 --t-kv 5000 --h 2 --causal --iters 0)
lab_test(gpu.08_tma_skeleton.fp8_forget_descale_caught gpu 1 MATCH "FAIL" COMMAND ${S08} --variant fp8 --t 300 --causal --h 2 --bug forget-descale --iters 0)
# The same long row with O left in the tensor core's accumulator (--bug o-in-tensor-core): caught.
lab_test(gpu.08_tma_skeleton.fp8_o_in_tensor_core_caught gpu 1 MATCH "O too far from fp64" "FAIL"
         COMMAND ${S08} --variant fp8 --t 1000 --t-kv 5000 --h 2 --causal --bug o-in-tensor-core --iters 0)
# The fp8 kernel's layout assumptions, one product at a time (gpu: 77 without a Hopper GPU).
add_executable(gpu_fp8_layout gpu_fp8_layout.cu)
target_link_libraries(gpu_fp8_layout PRIVATE lab_common)
target_compile_options(gpu_fp8_layout PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${LAB_CUDA_FLAGS}>)
set_target_properties(gpu_fp8_layout PROPERTIES CUDA_ARCHITECTURES 90a)
lab_test(gpu.08_tma_skeleton.fp8_layout_selftest gpu 0 MATCH "PASS: every fp8 layout assumption holds" COMMAND ${BIN}/gpu_fp8_layout)

# 08's handout names the instructions its kernels compile to (its table "what the SASS shows"): each
# must be in the built solution's sm_90a code, and no kernel may have a stack frame or local memory.
# Skipped where no cuobjdump is at hand (CI installs PyPI's) or the build has no sm_90a code.
get_filename_component(LAB_CUDA_BIN ${CMAKE_CUDA_COMPILER} DIRECTORY)
lab_test(sass.08_tma_skeleton.handout_claims cpu 0 MATCH "SASS claims of 08_tma_skeleton.md hold"
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/sass_claims.py
                 ${PROJECT_SOURCE_DIR}/ch12/08_tma_skeleton.md ${S08} --tools ${LAB_CUDA_BIN})

# The CPU check runs every kernel shape of 07's span, not only `window`'s 128-key tiles: a span
# that ignores skip (right for `window`, wrong for `full`) or that assumes 128-key tiles (wrong for
# the mma kernel's 64) passes every case of `window` alone, and must fail the case list.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_span_no_skip_07 07_sliding_window "if (!skip) return {0, lab::ceil_div(sh.t_kv, block_kv)};"
                   "(void)skip;")
  lab_wrong_answer(wrong_span_128_07 07_sliding_window "return {begin / block_kv, lab::ceil_div(end, block_kv)};"
                   "return {begin / 128, lab::ceil_div(end, 128)};")
  foreach(wrong wrong_span_no_skip_07 wrong_span_128_07)
    add_test(NAME cpu_check.07.${wrong}_fails
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/partial_stub_fails.py ${BIN}/${wrong} 07_sliding_window)
    set_tests_properties(cpu_check.07.${wrong}_fails PROPERTIES LABELS cpu TIMEOUT 600)
  endforeach()
endif()

# A wrong edge mask fails the output's check with an error at some row that names neither the call
# nor the element; edge_mask_probe asks mask_edges directly about one warp's fragments at the edges
# and names the first wrong element. The solution rebuilt with four wrong masks: the window's start
# never masked (only the diagonal tested, as 04 does), rows g and g+8 masked with each other's
# range, the fast path taken whenever the tile's first key is inside the warp's whole range, and
# the chapter's bound at the window's start (row i sees W + 1 keys).
if(LAB_BUILD_SOLUTIONS)
  set(mask_line "if (!keys[e >> 1].contains(kv0 + 8 * nb + 2 * t + (e & 1))) s[nb][e] = -INFINITY;")
  lab_wrong_answer(wrong_mask_diagonal_only_07 07_sliding_window "${mask_line}"
                   "if (kv0 + 8 * nb + 2 * t + (e & 1) >= keys[e >> 1].end) s[nb][e] = -INFINITY;")
  lab_wrong_answer(wrong_mask_rows_swapped_07 07_sliding_window "if (!keys[e >> 1].contains(" "if (!keys[e & 1].contains(")
  lab_wrong_answer(wrong_mask_first_key_07 07_sliding_window "if (kv0 < whole_begin || kv0 + 8 * N_BLOCKS > whole_end) {"
                   "if (kv0 < whole_begin || kv0 >= whole_end) {")
  lab_wrong_answer(wrong_mask_window_plus_one_07 07_sliding_window "${mask_line}"
                   "if (kv0 + 8 * nb + 2 * t + (e & 1) < keys[e >> 1].begin - 1 || kv0 + 8 * nb + 2 * t + (e & 1) >= keys[e >> 1].end) s[nb][e] = -INFINITY;")
  set(mask_call "^  check    EXERCISE edge-mask, asked on a shape of its own: mask_edges<8>\\(s, kv0=")
  set(diagonal "192, row_g=192, t=0, whole_begin=48, whole_end=193, sh: T=300, causal, W=160\\) left s\\[0\\]\\[1\\] \\(row 192, key 193\\) = 1, want -inf: key 193 is after row 192's diagonal \\(row 192 attends keys 33\\.\\.192\\)")
  set(window_start "0, row_g=192, t=0, whole_begin=48, whole_end=193, sh: T=300, causal, W=160\\) left s")
  lab_test(cpu_model.07.mask_window_start_open cpu 1
           MATCH "${mask_call}${window_start}\\[0\\]\\[0\\] \\(row 192, key 0\\) = 1, want -inf: key 0 is before row 192's window \\(W = 160: row 192 attends keys 33\\.\\.192\\)"
           COMMAND ${BIN}/wrong_mask_diagonal_only_07 --cpu --t 300 --causal --window 65 --h 2)
  lab_test(cpu_model.07.mask_rows_swapped cpu 1 MATCH "${mask_call}${diagonal}"
           COMMAND ${BIN}/wrong_mask_rows_swapped_07 --cpu --t 300 --causal --window 65 --h 2)
  lab_test(cpu_model.07.mask_skipped_by_first_key cpu 1 MATCH "${mask_call}${diagonal}"
           COMMAND ${BIN}/wrong_mask_first_key_07 --cpu --variant window-mma --t 256 --h 1 --causal --window 66)
  lab_test(cpu_model.07.mask_window_plus_one cpu 1
           MATCH "${mask_call}${window_start}\\[4\\]\\[0\\] \\(row 192, key 32\\) = 1, want -inf: key 32 is before row 192's window \\(W = 160: row 192 attends keys 33\\.\\.192\\)"
           COMMAND ${BIN}/wrong_mask_window_plus_one_07 --cpu --t 300 --causal --window 65 --h 2)
endif()

# A wrong parity in 08's ring_slot() breaks two waits at once (a parity is one bit): the consumers'
# wait on full passes before the tile lands, and the producer's wait on empty blocks on a free
# slot. The CPU check names the fill, its use of the slot and both waits: the stale read as well
# as the blocked producer, as the whole verdict (a precheck: no lines on an O the model never wrote
# follow it). The solution rebuilt with LAB_WRONG_RING_SLOT's answer on the host (the kernels keep
# the right one), on the CPU model.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_ring_slot_08 08_tma_skeleton "  return {n % stages, uint32_t(n / stages) & 1u};" "
#ifdef __CUDA_ARCH__
  return {n % stages, uint32_t(n / stages) & 1u};
#else
  const WrongRingSlot w = wrong_ring_slot(n, stages);
  return {w.stage, w.parity};
#endif
" PREFIX "#include \"${CMAKE_CURRENT_SOURCE_DIR}/wrong_ring_slot.h\"
")
  set_target_properties(wrong_ring_slot_08 PROPERTIES CUDA_ARCHITECTURES 90a)  # as 08's own build: its PTX is sm_90a's
  lab_wrong_answer_tests(precheck.08.ring_slot ${BIN}/wrong_ring_slot_08 LAB_WRONG_RING_SLOT
    MODES right never-flips flipped shifted
    SAID "^PASS"
         "ring_slot\\(3, 3\\) = \\{stage 0, parity 0\\}: fill 3 is slot 0's use 1, a phase of parity 1: the consumers' wait on k_full / v_full \\(parity 0\\) would pass before the tile lands.* \\(nothing was run\\)\\n  memory"
         "ring_slot\\(0, 3\\) = \\{stage 0, parity 1\\}: fill 0 is slot 0's use 0, a phase of parity 0: .* the producer's wait on k_empty / v_empty \\(parity 0\\) would block although the slot is free \\(nothing was run\\)\\n  memory"
         "ring_slot\\(0, 3\\) = \\{stage 1, parity 0\\}: fills take the slots in turn, so fill 0 goes to slot 0"
    ARGS --cpu ${S08_SHAPE})
  # fp8's precheck replays fp8's own ring (fp8::Tiles: 4 slots at D = 128), not the 16-bit kernel's 3.
  lab_wrong_answer_tests(precheck.08.fp8_ring ${BIN}/wrong_ring_slot_08 LAB_WRONG_RING_SLOT
    MODES never-flips
    SAID "ring_slot\\(4, 4\\) = \\{stage 0, parity 0\\}: fill 4 is slot 0's use 1"
    ARGS --cpu --variant fp8 --t 1000 --h 2)
endif()
