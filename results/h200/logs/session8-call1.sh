# Session 8, call 1 (2 GPUs). Trees: src = main at ../SHA (05/06 split plan by each sequence's keys;
# 06 table staged from the split's first key, stub check asked of the window), old = c6ea204 (session 7),
# s4 = src with 05's ring at 4 stages (experiment for B = 1).
# GPU 0: A/B old vs src (05/06), A/B src vs s4 (05), bench 05.  GPU 1: gpu-check 05 06 (ctest, check, stubs, sanitizers), bench 06.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c1; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in old s4; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
(cmake --build ../old/build --parallel 4 --target 05_decode 06_paged > $O/build_old.log 2>&1 || echo "OLD BUILD FAILED"; touch $O/built_old) &
(cmake --build ../s4/build --parallel 4 --target 05_decode > $O/build_s4.log 2>&1 || echo "S4 BUILD FAILED"; touch $O/built_s4) &
cmake --build build --parallel 24 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  while [ ! -f $O/built_old ] && [ $(el) -lt 150 ]; do sleep 2; done
  timeout 170 python3 ../ab.py $O/ab1 3 ../old/build build -- \
    "06-b8-1k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-1k-single|06_paged --variant single --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b1-32k|06_paged --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-mixed|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     05-b8-32k-mixed|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b8-32k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30" > $O/ab1.txt 2>&1
  echo "ab old/src exit $? at $(el) s"
  timeout 100 python3 ../ab.py $O/ab2 2 build ../s4/build -- \
    "05-b1-32k|05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     05-b1-128k|05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 131072 --kv-lens full --warmup 3 --iters 20 ;;
     05-b8-1k|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     05-b8-32k|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30" > $O/ab2.txt 2>&1
  echo "ab src/s4 exit $? at $(el) s"
  timeout $(( 560 - $(el) )) python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 280 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 275 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 560 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab1.txt $O/ab2.txt
grep -E "^== |UNEXPECTED|gpu-check:" $O/gc.log | tail -30
tail -3 $O/bench05.log $O/bench06.log
tar czf $OUT/c1.tgz -C /tmp c1; ls -la $OUT
