# Session 10, call 4 (2 GPUs): the tree at ../SHA (8413201: 06's window of per-page first rows).
# GPU 0: gpu-check 06 05 (ctest, check, stubs, sanitizers), then bench 06.
# GPU 1: bench 05, then the grading example over 06 (planted bug and hang still caught?).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s10c4; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 30 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout 280 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 275 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 540 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
  unset LAB_NO_BUILD
  timeout $(( 540 - $(el) )) python3 scripts/lab grading-example --gpus 1 --sections 06 --out $O/grading > $O/grading.log 2>&1
  echo "grading-example 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log
grep -E "^== (check|ctest)|passed,|UNEXPECTED|gpu-check:" $O/gc.log | tail -14
tail -n 3 $O/bench05.log $O/bench06.log; tail -n 15 $O/grading.log
tar czf $OUT/s10c4.tgz -C /tmp s10c4; ls -la $OUT
