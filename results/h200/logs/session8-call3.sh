# Session 8, call 3 (2 GPUs). Trees: src = main at ../SHA (split ticket: barrier + one acq_rel atomic;
# two-pass merged_lse; float4 warp-merge stores), prev = 9874159 (call 1's tree), tr = src + the
# %globaltimer stamps of .gpu/trace_patch.py (experiment).
# GPU 0: A/B prev vs src (05/06), traces of src, bench 05.  GPU 1: gpu-check 06 05 (ctest, check, stubs, sanitizers), bench 06.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c3; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in prev tr; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
(cmake --build ../prev/build --parallel 4 --target 05_decode 06_paged > $O/build_prev.log 2>&1 || echo "PREV BUILD FAILED"; touch $O/built_prev) &
(cmake --build ../tr/build --parallel 4 --target 05_decode 06_paged > $O/build_tr.log 2>&1 || echo "TR BUILD FAILED"; touch $O/built_tr) &
cmake --build build --parallel 24 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  while [ ! -f $O/built_prev ] && [ $(el) -lt 150 ]; do sleep 2; done
  S="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
  timeout 190 python3 ../ab.py $O/ab 3 ../prev/build build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 --kv-lens full $S ;;
     05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 --kv-lens full $S ;;
     05-b1-128k|05_decode --variant split --b 1 --t-kv 131072 --kv-lens full $S ;;
     05-b8-32k|05_decode --variant split --b 8 --t-kv 32768 --kv-lens full $S ;;
     05-b8-mixed|05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 --kv-lens full $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 --kv-lens full $S ;;
     05-b8-1k-single|05_decode --variant single --b 8 --t-kv 1024 --kv-lens full $S" > $O/ab.txt 2>&1
  echo "ab prev/src exit $? at $(el) s"
  while [ ! -f $O/built_tr ] && [ $(el) -lt 250 ]; do sleep 2; done
  run() { echo "== $*"; timeout 60 "$@" 2>&1 | grep -E "TRACE|time |FAIL" ; }
  export LAB_TRACE=8
  T="--h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --warmup 10 --iters 30"
  run ../tr/build/bin/05_decode --variant split --b 1 --t-kv 32768 $T
  run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 1024 $T
  run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 32768 $T
  run ../tr/build/bin/06_paged --variant split --b 8 --t-kv 1024 $T
  run ../tr/build/bin/06_paged --variant split --b 1 --t-kv 32768 $T
  unset LAB_TRACE
  echo "traces done at $(el) s"
  timeout $(( 570 - $(el) )) python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 280 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 275 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 570 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab.txt
grep -E "^== (check|ctest)|passed,|UNEXPECTED|gpu-check:" $O/gc.log | tail -12
tail -n 3 $O/bench05.log; tail -n 3 $O/bench06.log
tar czf $OUT/c3.tgz -C /tmp c3; ls -la $OUT
