# Sections 01-04: an untouched stub never passes without a GPU. Each stub's CPU model runs the
# stub's own exercise functions (shared with its kernel), so it fails (exit 1) as the kernel
# would; where the exercises run only on a GPU (04's mma fragments) it says "needs a GPU" (77).
# The solutions' CPU models passing over their case lists is driver.check_NN_cpu_model. The
# verdict names the stub's look: 01's P and 04's scores stay NaN (all of O is NaN), 02's tile
# state is never updated (all of O is 0), 03's output is never written.
set(STUB_NAN "all [0-9]+ elements of O are NaN or inf.*still the stub")
foreach(v kernels cublas)
  lab_test(cpu_model.01.stub_fails_${v} cpu 1 MATCH "FAIL" "${STUB_NAN}" COMMAND ${BIN}/lab_01_naive --cpu --variant ${v} --t 65)
endforeach()
lab_test(cpu_model.02.stub_fails cpu 1 MATCH "FAIL" "every one of the [0-9]+ elements checked is 0.*still the stub"
         COMMAND ${BIN}/lab_02_v1_tile --cpu --t 65 --causal)
lab_test(cpu_model.03.stub_fails cpu 1 MATCH "FAIL" "output not written" COMMAND ${BIN}/lab_03_v2_loop_order --cpu --t 65 --causal)
lab_test(cpu_model.04.stub_fails_scalar cpu 1 MATCH "FAIL" "${STUB_NAN}" COMMAND ${BIN}/lab_04_fp16 --cpu --variant scalar --t 65)
foreach(v mma mma-no-ldmatrix mma-no-cp-async)
  lab_test(cpu_model.04.stub_needs_gpu_${v} cpu 77 MATCH "^not checked here: needs a GPU" COMMAND ${BIN}/lab_04_fp16 --cpu --variant ${v} --t 65)
endforeach()
# The pitfalls run on the solution's CPU model through the same given code a filled-in stub has.
lab_test(cpu_model.01.bug_no_max_subtract cpu 1 MATCH "NaN" COMMAND ${BIN}/01_naive --cpu --bug no-max-subtract --magnitude 8 --t 128 --h 2)
lab_test(cpu_model.02.bug_no_rescale cpu 1 MATCH "FAIL" COMMAND ${BIN}/02_v1_tile --cpu --bug no-rescale --t 200)
lab_test(cpu_model.02.bug_local_causal cpu 1 MATCH "FAIL" COMMAND ${BIN}/02_v1_tile --cpu --bug local-causal --t 200 --causal)
lab_test(cpu_model.03.bug_no_rescale cpu 1 MATCH "FAIL" COMMAND ${BIN}/03_v2_loop_order --cpu --bug no-rescale --t 200)
# The CPU model shares each row among a team of threads, as the kernel's block does: a softmax that
# ignores rank() and size(), or calls a reduction from some members only, fails there too (named),
# never passing on the CPU to fail on a GPU. The solution rebuilt with LAB_WRONG_TEAM's sums.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_team_01 01_naive
    "  for (int j = keys.begin + team.rank(); j < keys.end; j += team.size()) l += expf(s_row[j] - m);
  l = team.sum(l);" "
#ifdef __CUDA_ARCH__
  for (int j = keys.begin + team.rank(); j < keys.end; j += team.size()) l += expf(s_row[j] - m);
  l = team.sum(l);
#else
  l = wrong_team_sum(team, s_row, keys, m);
#endif" PREFIX "#include \"${CMAKE_CURRENT_SOURCE_DIR}/wrong_team.h\"
")
  lab_wrong_answer_tests(cpu_model.01.team ${BIN}/wrong_team_01 LAB_WRONG_TEAM
    MODES right whole-row leader-sum
    SAID "^PASS"
         "every row of P sums to 1/4 with a team of 4: each member summed the whole row"
         "not every member called: every member must call each reduction"
    ARGS --cpu --t 100 --h 2 --causal)
endif()
# S and P are dense ([rows, T_kv]): a softmax loop that runs one key past its row reads the next
# row's first score (in the max: no visible change) or writes the next row's first probability
# (which that row overwrites on the CPU): the output passes. softmax_row_probe names the access.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_softmax_read_01 01_naive
    "j < keys.end; j += team.size()) m = fmaxf(m, s_row[j]);" "j <= keys.end; j += team.size()) m = fmaxf(m, s_row[j]);")
  lab_test(cpu_model.01.softmax_read_past_the_end cpu 1
           MATCH "^  check    softmax_row\\(keys=.0, 37\\), t_kv=37\\) read s_row\\[37\\], past the row's end: a row has exactly t_kv scores.*a test row the check asks softmax_row about before the case"
           COMMAND ${BIN}/wrong_softmax_read_01 --cpu --t 100 --h 2)
  lab_wrong_answer(wrong_softmax_write_01 01_naive
    "j < t_kv; j += team.size()) p_row[j] =" "j <= t_kv; j += team.size()) p_row[j] =")
  lab_test(cpu_model.01.softmax_write_past_the_end cpu 1
           MATCH "^  check    softmax_row\\(keys=.0, 37\\), t_kv=37\\) wrote p_row\\[37\\], past the row's end: a row has exactly t_kv probabilities"
           COMMAND ${BIN}/wrong_softmax_write_01 --cpu --t 100 --h 2)
  # An exercise that never ends, on a shape the CPU finishes in a second: `scripts/lab run` stops
  # it once the CPU model's "still running" line (which names the shape) shows it is stuck.
  lab_wrong_answer(endless_softmax_01 01_naive
    "j < keys.end; j += team.size()) m = fmaxf(m, s_row[j]);"
    "j < keys.end; j += team.size()) m = fmaxf(m, s_row[j]);\n  for (volatile int spin = 0; spin >= 0;) {}")
  add_test(NAME cpu_model.01.endless_loop_stopped_early
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/stuck_cpu_model.py ${BIN}/endless_softmax_01 --t 16)
  set_tests_properties(cpu_model.01.endless_loop_stopped_early PROPERTIES LABELS cpu TIMEOUT 120)
endif()
# A tile_load guard that lets row rows_valid through reads past the tile (on a GPU, whatever lies
# there): the CPU model names the call, rather than an O that is NaN everywhere.
if(LAB_BUILD_SOLUTIONS)
  lab_wrong_answer(wrong_tile_load_02 02_v1_tile "if (r >= rows_valid) return" "if (r > rows_valid) return")
  lab_test(cpu_model.02.tile_load_past_the_end cpu 1
           MATCH "tile_load\\(tile_row0, row_stride, r=1, c=0, rows_valid=1\\) = \\(NaN, \\.\\.\\.\\), want zeros"
           COMMAND ${BIN}/wrong_tile_load_02 --cpu --t 65 --causal)
  # rows_in_tile without its cap at tile_size claims all of T for tile 0: the step would overrun the
  # shared tiles (a crash at T = 1000); ragged_probe names the call instead, and nothing is read.
  lab_wrong_answer(wrong_rows_in_tile_02 02_v1_tile "return lab::imin(tile_size, t - tile * tile_size);"
                   "return t - tile * tile_size;")
  lab_test(cpu_model.02.rows_in_tile_uncapped cpu 1
           MATCH "^  check    rows_in_tile\\(tile=0, tile_size=64, t=1000\\) = 1000, want 64: a tile has at most tile_size rows"
           COMMAND ${BIN}/wrong_rows_in_tile_02 --cpu --t 1000 --causal)
  # score_kept without j < T_kv keeps the padded keys of the last tile (non-causal only: causal's own
  # test drops them); the probe names the call whatever the case.
  lab_wrong_answer(wrong_score_kept_02 02_v1_tile "return j < sh.t_kv && lab::key_visible(i, j, sh.t_q, sh.t_kv, sh.causal, 0);"
                   "return !sh.causal || j <= i + (sh.t_kv - sh.t_q);")
  lab_test(cpu_model.02.score_kept_padded_key cpu 1
           MATCH "^  check    score_kept\\(i=0, j=1, T_q=1, T_kv=1, not causal\\) = true, want false: key 1 is a padded key"
           COMMAND ${BIN}/wrong_score_kept_02 --cpu --t 100)
endif()
# Pitfall 3 (shared memory over 48 KB) needs a launch: no CPU model of it, and D = 64 fits in 48 KB.
lab_test(cpu_model.04.bug_no_smem_optin_needs_gpu cpu 77 MATCH "needs a GPU" COMMAND ${BIN}/04_fp16 --cpu --variant mma --d 128 --bug no-smem-optin --t 64)
# Without a GPU the line says only a GPU runs it, rather than suggesting --cpu (which says the same).
lab_test(no_gpu.04.bug_no_smem_optin_no_cpu_hint cpu "77;1" MATCH "^cannot run here: .*only a GPU runs this: --bug no-smem-optin|launch was refused"
         COMMAND ${BIN}/04_fp16 --variant mma --d 128 --bug no-smem-optin --t 64)
lab_test(no_gpu.04.lab_mma_no_cpu_hint cpu "77;0;1" MATCH "^cannot run here: .*only a GPU runs this: the mma variant|(PASS|FAIL): 04_fp16"
         COMMAND ${BIN}/lab_04_fp16 --variant mma --t 64)
lab_test(bad_input.04.no_smem_optin_d64 cpu 2 MATCH "^bad input: --bug no-smem-optin needs --d 128" COMMAND ${BIN}/04_fp16 --variant mma --d 64 --bug no-smem-optin)
lab_test(gpu.04_fp16.bug_no_smem_optin gpu 1 MATCH "launch was refused" "cudaFuncSetAttribute"
         COMMAND ${BIN}/04_fp16 --variant mma --d 128 --dtype bf16 --bug no-smem-optin --t 256 --h 2 --iters 0)
