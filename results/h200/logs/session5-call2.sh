# Session 5, call 2 (2 GPUs), tree src = main at ../SHA (06: table window + 4-stage ring adopted).
# GPU 0: bench 08 --ncu (FlexAttention's Inductor/Triton caches from call 1's bench 07 in ../cache),
#        then bench 04 --tag ablation / accum-sweep if time is left.
# GPU 1: bench 06 --ncu, gpu-check 06 05 (ctest -L gpu, check, stubs, sanitizers), bench 05 --ncu,
#        bench 05 --tag split-count.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c2; mkdir -p $O/results; cp results/h200/ncu.json $O/results/ncu.json
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 32 --target 08_tma_skeleton 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
echo "built 05 06 08 at $(el) s"
(cmake --build build --parallel 24 > $O/build_rest.log 2>&1 || echo "BUILD FAILED"; echo "built all at $(el) s"; touch $O/built_all) &
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0 TORCHINDUCTOR_CACHE_DIR=$PWD/../cache/inductor TRITON_CACHE_DIR=$PWD/../cache/triton
  timeout $(( 560 - $(el) )) python3 scripts/lab bench 08 --ncu --out $O/results; echo "bench 08 exit $? at $(el) s"
  [ $(el) -lt 500 ] && { timeout $(( 585 - $(el) )) python3 scripts/lab bench 04 --tag accum-sweep --out $O/results; echo "bench 04 accum-sweep exit $? at $(el) s"; }
  [ $(el) -lt 510 ] && { timeout $(( 585 - $(el) )) python3 scripts/lab bench 04 --tag ablation --out $O/results; echo "bench 04 ablation exit $? at $(el) s"; }
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout $(( 200 - $(el) )) python3 scripts/lab bench 06 --ncu --out $O/results; echo "bench 06 exit $? at $(el) s"
  while [ ! -f $O/built_all ] && [ $(el) -lt 300 ]; do sleep 2; done
  timeout $(( 420 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s $(( 415 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 570 - $(el) )) python3 scripts/lab bench 05 --ncu --out $O/results; echo "bench 05 exit $? at $(el) s"
  [ $(el) -lt 490 ] && { timeout $(( 588 - $(el) )) python3 scripts/lab bench 05 --tag split-count --out $O/results; echo "bench 05 split-count exit $? at $(el) s"; }
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
grep -h "exit\|done at\|FAILED\|built\|wrote" $O/gpu0.log $O/gpu1.log | tail -24; grep -E "passed|failed|as expected|UNEXPECTED|exit " $O/gc.log | tail -20
tar czf $OUT/c2.tgz -C /tmp c2; ls -la $OUT
