# Session 6, call 1 (2 GPUs). Trees: src = main at ../SHA (06 page-16 specialisation adopted, 05/06 split
# merge vectorised, 08 paged: per-page maps made by edit_page_maps, paged-pool: lazy last-page acquire);
# base = d8b03a7 (session 5's last commit) for the A/B.
# GPU 0: bench 06, bench 05 (SDPA baselines now replayed from CUDA graphs), then A/B 05/06 base vs new.
# GPU 1: ctest -L gpu, gpu-check 05 06 08 (check, stubs, sanitizers), then A/B 08 base vs new.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c1; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../base -B ../base/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_base.log 2>&1
cmake --build build --parallel 32 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
echo "built 05 06 at $(el) s"
(cmake --build build --parallel 20 > $O/build_rest.log 2>&1 || echo "BUILD FAILED"; echo "built all at $(el) s"; touch $O/built_all) &
(cmake --build ../base/build --parallel 12 --target 05_decode 06_paged 08_tma_skeleton > $O/build_base.log 2>&1 || echo "BASE BUILD FAILED"; echo "built base at $(el) s"; touch $O/built_base) &
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout $(( 200 - $(el) )) python3 scripts/lab bench 06 --out $O/results; echo "bench 06 exit $? at $(el) s"
  timeout $(( 340 - $(el) )) python3 scripts/lab bench 05 --out $O/results; echo "bench 05 exit $? at $(el) s"
  while [ ! -f $O/built_base ] && [ $(el) -lt 400 ]; do sleep 2; done
  timeout $(( 500 - $(el) )) python3 ../ab.py $O/ab0 2 ../base/build build -- \
    "05-b1-32k|05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     05-b1-128k|05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 131072 --kv-lens full --warmup 3 --iters 20 ;;
     05-b8-1k|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     05-b8-32k-mixed|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b8-1k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-mixed|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b1-32k|06_paged --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30" \
    > $O/ab0.txt 2>&1; echo "ab 05/06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  while [ ! -f $O/built_all ] && [ $(el) -lt 200 ]; do sleep 2; done
  (cd build && timeout 90 ctest -L gpu --output-on-failure > $O/ctest_gpu.log 2>&1); echo "ctest -L gpu exit $? at $(el) s"
  timeout $(( 400 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 08 06 05 --only check stubs sanitize --deadline-s $(( 395 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 08 06 05 exit $? at $(el) s"
  while [ ! -f $O/built_base ] && [ $(el) -lt 400 ]; do sleep 2; done
  timeout $(( 540 - $(el) )) python3 ../ab.py $O/ab1 2 ../base/build build -- \
    "08-ws-d128|08_tma_skeleton --variant ws --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p128|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-pool-d128-p64|08_tma_skeleton --variant paged-pool --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-pool-d128-p128|08_tma_skeleton --variant paged-pool --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d64-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-pool-d64-p64|08_tma_skeleton --variant paged-pool --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-paged-d128-p64-c|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 --causal" \
    > $O/ab1.txt 2>&1; echo "ab 08 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log; grep -E "tests passed|Failed|\*\*\*" $O/ctest_gpu.log | tail -8
grep -E "^=====|passed|ERROR SUMMARY|RACECHECK SUMMARY|hazard" $O/gc.log | tail -60
cat $O/ab0.txt $O/ab1.txt
tar czf $OUT/c1.tgz -C /tmp c1; ls -la $OUT
