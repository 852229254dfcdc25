# Session 8, call 5 (2 GPUs). Tree: src = main at ../SHA (3c43fcb: the decode code of 2b8b842, the
# row-pair loader reverted). GPU 0: bench 05, bench 06.  GPU 1: gpu-check 06 05 (ctest, check, stubs, sanitizers).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c5; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 30 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout 140 python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
  timeout $(( 320 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 270 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 265 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log
grep -E "^== (check|ctest)|passed,|UNEXPECTED|gpu-check:" $O/gc.log | tail -12
tail -n 2 $O/bench05.log; tail -n 2 $O/bench06.log
tar czf $OUT/c5.tgz -C /tmp c5; ls -la $OUT
