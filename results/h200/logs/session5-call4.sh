# Session 5, call 4 (2 GPUs, short: ~300 s of device time left). src = main (06: page 16 specialised
# at compile time, table-window bound without a division); st4 = a96fb50 (06 as checked in call 2).
# GPU 0: bench 06 --no-baselines. GPU 1: gpu-check 06 (check, stubs, sanitizers), ctest 06 tests
# (same_as_05 included), then A/B of 06 src vs st4 beside 05 on the key shapes.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c4; mkdir -p $O/results $O/ab
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
(cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1 &&
 cmake --build build --parallel 24 --target 05_decode 06_paged lab_06_paged > $O/build.log 2>&1) || { tail -30 $O/build.log; exit 1; } &
(cd ../st4 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/../src/.deps > $O/cfg_st4.log 2>&1 &&
 cmake --build build --parallel 8 --target 06_paged > $O/build_st4.log 2>&1) || echo "BUILD st4 FAILED" &
wait
echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout $(( 190 - $(el) )) python3 scripts/lab bench 06 --no-baselines --out $O/results; echo "bench 06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout $(( 120 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 06 --only check stubs sanitize --deadline-s $(( 115 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 06 exit $? at $(el) s"
  timeout $(( 165 - $(el) )) ctest --test-dir build -R "gpu.06" --output-on-failure > $O/ctest06.log 2>&1; echo "ctest gpu.06 exit $? at $(el) s"
  ab() { local name=$1; shift; timeout 20 "$@" --json $O/ab/$name.json --quiet > $O/ab/$name.log 2>&1; echo "$name exit $? at $(el) s"; }
  H="--h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 32768 --warmup 5 --iters 30"
  for t in src st4; do
    B=../$t/build/bin
    [ $(el) -lt 180 ] && ab $t.06.split.full   $B/06_paged --variant split  $H --kv-lens full --page-size 16
    [ $(el) -lt 180 ] && ab $t.06.single.full  $B/06_paged --variant single $H --kv-lens full --page-size 16
    [ $(el) -lt 180 ] && ab $t.06.split.mixed  $B/06_paged --variant split  $H --kv-lens random --page-size 16
  done
  [ $(el) -lt 185 ] && ab src.05.split.full  build/bin/05_decode --variant split  $H --kv-lens full
  [ $(el) -lt 185 ] && ab src.05.single.full build/bin/05_decode --variant single $H --kv-lens full
  [ $(el) -lt 185 ] && ab src.05.split.mixed build/bin/05_decode --variant split  $H --kv-lens random
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
for f in $O/ab/*.json; do python3 -c "import json,sys; r=json.load(open('$f'))[-1]; print(f\"{'$f'.split('/')[-1][:-5]:22s} {r['timing']['median_ms']:.4f} ms  check={r['check']['passed']}\")"; done
grep -h "exit\|done at\|FAILED\|built" $O/gpu0.log $O/gpu1.log | tail -12; grep -E "passed|failed|as expected|UNEXPECTED" $O/gc.log | tail -6; tail -3 $O/ctest06.log
tar czf $OUT/c4.tgz -C /tmp c4
