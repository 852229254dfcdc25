# Session 13, call 3 (1 GPU): the tree at ../SHA (two sets of 4 warps + graph timing of the decode
# steps): ctest's gpu tests of 05/06 (graph_timing new), bench 05, bench 06, check 05 06 --solution.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s13c3; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 05_decode 06_paged lab_05_decode lab_06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
timeout 90 ctest --test-dir build -L gpu -R "0[56]_" -E "\.check_" -j 4 --output-on-failure > $O/ctest.log 2>&1
echo "ctest gpu 05/06 exit $? at $(el) s"; grep -E "tests passed|Failed|graph_timing" $O/ctest.log | tail -4
./build/bin/05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full | grep time
python3 tests/graph_timing.py build/bin > $O/graph_timing.log 2>&1; cat $O/graph_timing.log
tar czf $OUT/s13c3.tgz -C /tmp s13c3
timeout 150 python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
tar czf $OUT/s13c3.tgz -C /tmp s13c3
timeout 150 python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
tar czf $OUT/s13c3.tgz -C /tmp s13c3
R=$(( 560 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab check 05 06 --solution --require-gpu --jobs 4 > $O/check.log 2>&1
echo "check 05 06 exit $? at $(el) s"; grep -E "passed|FAIL" $O/check.log | tail -3
tar czf $OUT/s13c3.tgz -C /tmp s13c3
