# Session 13, call 1 (1 GPU): the tree at ../SHA (branch exp/s12-two-sets merged with main: two sets of
# 4 warps): check 05 06 --solution, sanitizers and stubs of 05 06, ctest's gpu tests of 05/06,
# bench 05 then bench 06 with the time left.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s13c1; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 05_decode 06_paged lab_05_decode lab_06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
timeout 100 python3 scripts/lab check 05 06 --solution --require-gpu --jobs 4 > $O/check.log 2>&1
echo "check 05 06 exit $? at $(el) s"; grep -E "passed|FAIL" $O/check.log | tail -3
timeout 210 python3 scripts/lab gpu-check --out $O/gc --sections 05 06 --only sanitize stubs --deadline-s 200 > $O/gc.log 2>&1
echo "gpu-check 05 06 sanitize stubs exit $? at $(el) s"; grep -E "passed,|UNEXPECTED|gpu-check:|sanitize|memcheck|racecheck|synccheck" $O/gc.log | tail -12
timeout 60 ctest --test-dir build -L gpu -R "0[56]_" -E "\.check_" -j 4 --output-on-failure > $O/ctest.log 2>&1
echo "ctest gpu 05/06 exit $? at $(el) s"; tail -n 4 $O/ctest.log
tar czf $OUT/s13c1.tgz -C /tmp s13c1
R=$(( 585 - $(el) )); [ $R -gt 60 ] && timeout $R python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
tar czf $OUT/s13c1.tgz -C /tmp s13c1
tail -n 2 $O/bench05.log
