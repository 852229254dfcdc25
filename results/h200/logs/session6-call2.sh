# Session 6, call 2 (2 GPUs). Trees: src = main at ../SHA (08 paged: acquires after V); prev = 167e607
# (call 1's tree: acquires between K and V); exp3 = src with 06's ring at 3 stages (an experiment).
# GPU 0: bench 08 (the tree's 08: paged and paged-pool changed this session).
# GPU 1: A/B 08 paged (prev vs src), A/B 06 (src vs exp3), sanitizers 06 05, gpu-check 08 (check, stubs,
#        sanitizers), the GPU ctests, bench 05 --tag split-count (the split merge changed).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c2; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in prev exp3; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
cmake --build build --parallel 32 --target 08_tma_skeleton > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
echo "built 08 at $(el) s"
(cmake --build build --parallel 16 > $O/build_rest.log 2>&1 || echo "BUILD FAILED"; echo "built all at $(el) s"; touch $O/built_all) &
(cmake --build ../prev/build --parallel 8 --target 08_tma_skeleton > $O/build_prev.log 2>&1 || echo "PREV BUILD FAILED"
 cmake --build ../exp3/build --parallel 8 --target 06_paged > $O/build_exp3.log 2>&1 || echo "EXP3 BUILD FAILED"
 echo "built prev, exp3 at $(el) s"; touch $O/built_exp) &
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout $(( 585 - $(el) )) python3 scripts/lab bench 08 --out $O/results; echo "bench 08 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  while [ ! -f $O/built_all ] || [ ! -f $O/built_exp ]; do [ $(el) -gt 200 ] && break; sleep 2; done
  timeout 80 python3 ../ab.py $O/ab08 2 ../prev/build build -- \
    "08-paged-d128-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p128|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d64-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-ws-d128|08_tma_skeleton --variant ws --b 4 --h 16 --t 4096 --d 128 --dtype bf16" > $O/ab08.txt 2>&1
  echo "ab 08 exit $? at $(el) s"
  timeout 100 python3 ../ab.py $O/ab06 2 build ../exp3/build -- \
    "06-b8-1k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-mixed|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b1-32k|06_paged --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-8k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 8192 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-single|06_paged --variant single --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30" > $O/ab06.txt 2>&1
  echo "ab 06 exit $? at $(el) s"
  timeout 130 python3 scripts/lab gpu-check --out $O/gc_san --sections 06 05 --only sanitize --deadline-s 125 > $O/gc_san.log 2>&1
  echo "sanitizers 06 05 exit $? at $(el) s"
  timeout $(( 520 - $(el) )) python3 scripts/lab gpu-check --out $O/gc08 --sections 08 --only ctest check stubs sanitize --deadline-s $(( 515 - $(el) )) > $O/gc08.log 2>&1
  echo "gpu-check 08 (+ ctest) exit $? at $(el) s"
  [ $(el) -lt 500 ] && { timeout $(( 585 - $(el) )) python3 scripts/lab bench 05 --tag split-count --no-baselines --out $O/results; echo "bench 05 split-count exit $? at $(el) s"; }
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu1.log; tail -5 $O/gpu0.log
grep -E "passed|UNEXPECTED|exit [1-9]" $O/gc_san.log $O/gc08.log | tail -20
cat $O/ab08.txt $O/ab06.txt | grep -v ": exit 0"
tar czf $OUT/c2.tgz -C /tmp c2; ls -la $OUT
