# Session 8, call 2 (2 GPUs). Trees: src = main at ../SHA; tr = src + %globaltimer stamps per block
# (experiment, .gpu/trace_patch.py). GPU 0: where a decode launch's time goes (block start / loop end /
# exit spread), forced split counts at 1024 keys. GPU 1: bench 04 (SDPA timed like the other sections).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c2; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../tr -B ../tr/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_tr.log 2>&1
(cmake --build ../tr/build --parallel 8 --target 05_decode 06_paged > $O/build_tr.log 2>&1 || { tail -20 $O/build_tr.log; echo "TR BUILD FAILED"; }; touch $O/built_tr) &
cmake --build build --parallel 24 --target 04_fp16 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=1
  timeout 420 python3 scripts/lab bench 04 --out $O/results > $O/bench04.log 2>&1; echo "bench 04 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=0
  S="--h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --warmup 10 --iters 30"
  run() { echo "== $*"; timeout 60 "$@" 2>&1 | grep -E "TRACE|time |FAIL" ; }
  for n in 2 4 8; do run build/bin/05_decode --variant split --b 8 --t-kv 1024 $S --splits $n; done
  for n in 2 4; do run build/bin/06_paged --variant split --b 8 --t-kv 1024 $S --splits $n; done
  for n in 16 24 32; do run build/bin/05_decode --variant split --b 1 --t-kv 32768 $S --splits $n; done
  while [ ! -f $O/built_tr ]; do sleep 2; done
  export LAB_TRACE=8
  for rep in 1 2; do
    run ../tr/build/bin/05_decode --variant split --b 1 --t-kv 32768 $S
    run ../tr/build/bin/05_decode --variant split --b 1 --t-kv 131072 $S
    run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 32768 $S
    run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 1024 $S
    run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 1024 $S --splits 4
    run ../tr/build/bin/06_paged --variant split --b 1 --t-kv 32768 $S
    run ../tr/build/bin/06_paged --variant split --b 8 --t-kv 1024 $S
    run ../tr/build/bin/05_decode --variant split --b 8 --t-kv 32768 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens random --warmup 10 --iters 30
    run ../tr/build/bin/06_paged --variant split --b 8 --t-kv 32768 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens random --warmup 10 --iters 30
  done
  echo "experiments done at $(el) s"
) > $O/gpu0.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log; tail -3 $O/bench04.log
tar czf $OUT/c2.tgz -C /tmp c2; ls -la $OUT
