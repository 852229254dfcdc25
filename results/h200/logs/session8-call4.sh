# Session 8, call 4 (2 GPUs). Trees: src = main at ../SHA (22df692: + row pairs share one address),
# m = 2b8b842 (+ the last block's merge as an online softmax over groups of splits), prev = c24a10a
# (call 3's tree), tr = src + %globaltimer stamps (experiment).
# GPU 0: A/B prev vs m, A/B m vs src, traces of src, bench 05.  GPU 1: gpu-check 06 05 of src, bench 06.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c4; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in prev m tr; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
for t in prev m tr; do (cmake --build ../$t/build --parallel 3 --target 05_decode 06_paged > $O/build_$t.log 2>&1 || echo "$t BUILD FAILED"; touch $O/built_$t) & done
cmake --build build --parallel 22 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  while [ ! -f $O/built_prev ] || [ ! -f $O/built_m ]; do [ $(el) -gt 150 ] && break; sleep 2; done
  S="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
  timeout 120 python3 ../ab.py $O/ab1 3 ../prev/build ../m/build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 --kv-lens full $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 --kv-lens full $S ;;
     05-b1-128k|05_decode --variant split --b 1 --t-kv 131072 --kv-lens full $S" > $O/ab1.txt 2>&1
  echo "ab prev/m exit $? at $(el) s"
  timeout 150 python3 ../ab.py $O/ab2 3 ../m/build build -- \
    "06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 --kv-lens full $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 --kv-lens full $S ;;
     06-b8-32k|06_paged --variant split --b 8 --t-kv 32768 --kv-lens full $S ;;
     06-b8-8k-single|06_paged --variant single --b 8 --t-kv 8192 --kv-lens full $S ;;
     05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 --kv-lens full $S" > $O/ab2.txt 2>&1
  echo "ab m/src exit $? at $(el) s"
  run() { echo "== $*"; timeout 60 "$@" 2>&1 | grep -E "TRACE|time |FAIL" ; }
  export LAB_TRACE=8
  T="--h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --warmup 10 --iters 30"
  run ../tr/build/bin/05_decode --variant split --b 1 --t-kv 32768 $T
  run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 1024 $T
  run ../tr/build/bin/06_paged --variant split --b 8 --t-kv 1024 $T
  unset LAB_TRACE
  timeout $(( 575 - $(el) )) python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 280 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 275 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 575 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab1.txt $O/ab2.txt
grep -E "^== (check|ctest)|passed,|UNEXPECTED|gpu-check:" $O/gc.log | tail -12
tail -n 2 $O/bench05.log; tail -n 2 $O/bench06.log
tar czf $OUT/c4.tgz -C /tmp c4; ls -la $OUT
