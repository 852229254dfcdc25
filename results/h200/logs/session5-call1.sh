# Session 5, call 1 (2 GPUs). Trees: src = main (1443e2d); 4st, win, both = decode experiments
# (4-stage ring; 06 block table staged in shared memory; both); 2prod = 08 with K and V issued by
# two producer warps.
# GPU 0: bench 01 02 03 04 --ncu --ceilings (kernels unchanged since verified; queued timing now),
#        then the stubs/checks of 07 and 01-04 with what time is left.
# GPU 1: A/B (decode trees, 08 trees, interleaved, twice), then bench 07 --ncu with the Inductor
#        and Triton caches kept for call 2's bench 08.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c1; mkdir -p $O/results $O/ab; cp results/h200/ncu.json $O/results/ncu.json
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
DEPS=$PWD/.deps
for t in src 4st win both 2prod; do (cd ../$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$DEPS) > $O/cfg_$t.log 2>&1 & done; wait
cmake --build build --parallel 32 --target 01_naive 02_v1_tile 03_v2_loop_order 04_fp16 > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
echo "built 01-04 at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout $(( 380 - $(el) )) python3 scripts/lab bench 01 02 03 04 --ncu --ceilings --out $O/results; echo "bench 01-04 exit $? at $(el) s"
  timeout $(( 585 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 07 01 02 03 04 --only check stubs --deadline-s $(( 580 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 07 01-04 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  cmake --build build --parallel 16 > $O/build_rest.log 2>&1 || echo "BUILD FAILED"
  for t in 4st win both; do (cd ../$t && cmake --build build --parallel 6 --target 05_decode 06_paged) > $O/build_$t.log 2>&1 || echo "BUILD $t FAILED" & done
  (cd ../2prod && cmake --build build --parallel 6 --target 08_tma_skeleton) > $O/build_2prod.log 2>&1 || echo "BUILD 2prod FAILED" &
  wait
  echo "built all at $(el) s"
  ab() { local name=$1; shift; timeout 30 "$@" --json $O/ab/$name.json --quiet > $O/ab/$name.log 2>&1; echo "$name exit $? at $(el) s"; }
  D05="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --warmup 5 --iters 30"
  for rep in 1 2; do
    for t in src 4st both win; do
      B=../$t/build/bin
      if [ $t != win ]; then
        ab $rep.$t.05.split.b1.128k  $B/05_decode --variant split  $D05 --t-kv 131072 --b 1
        [ $rep = 1 ] && ab $rep.$t.05.split.b8.32k   $B/05_decode --variant split  $D05 --t-kv 32768
        [ $rep = 1 ] && ab $rep.$t.05.single.b8.32k  $B/05_decode --variant single $D05 --t-kv 32768
      fi
      ab $rep.$t.06.split.b8.32k   $B/06_paged --variant split  $D05 --t-kv 32768 --page-size 16
      [ $rep = 1 ] && ab $rep.$t.06.single.b8.32k  $B/06_paged --variant single $D05 --t-kv 32768 --page-size 16
      [ $rep = 1 ] && ab $rep.$t.06.split.b1.32k   $B/06_paged --variant split  $D05 --t-kv 32768 --b 1 --page-size 16
      [ $rep = 1 ] && ab $rep.$t.06.split.mixed    $B/06_paged --variant split  $D05 --t-kv 32768 --kv-lens random --page-size 16
    done
    for t in src 2prod; do
      B=../$t/build/bin
      P="--dtype bf16 --warmup 5 --iters 20"
      ab $rep.$t.08.pool.p64.b4d128  $B/08_tma_skeleton --variant paged-pool $P --b 4 --t 4096 --h 16 --d 128 --page-size 64
      ab $rep.$t.08.pool.p64.b4d128c $B/08_tma_skeleton --variant paged-pool $P --b 4 --t 4096 --h 16 --d 128 --page-size 64 --causal
      ab $rep.$t.08.pool.p64.b4d64   $B/08_tma_skeleton --variant paged-pool $P --b 4 --t 4096 --h 32 --d 64 --page-size 64
      ab $rep.$t.08.pool.p128.b4d128 $B/08_tma_skeleton --variant paged-pool $P --b 4 --t 4096 --h 16 --d 128 --page-size 128
      ab $rep.$t.08.ws.b4d128        $B/08_tma_skeleton --variant ws $P --b 4 --t 4096 --h 16 --d 128
      ab $rep.$t.08.ws.b4d64         $B/08_tma_skeleton --variant ws $P --b 4 --t 4096 --h 32 --d 64
    done
    [ $(el) -gt 320 ] && break
  done
  echo "A/B done at $(el) s"
  export TORCHINDUCTOR_CACHE_DIR=/tmp/cache/inductor TRITON_CACHE_DIR=/tmp/cache/triton
  timeout $(( 585 - $(el) )) python3 scripts/lab bench 07 --ncu --out $O/results; echo "bench 07 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
python3 - <<PY > $O/ab_summary.txt
import json, glob, os
for f in sorted(glob.glob('$O/ab/*.json'), key=lambda f: os.path.basename(f).split('.', 2)[2] + os.path.basename(f)):
    try:
        r = json.load(open(f))[-1]; t = r['timing']; m = r.get('metrics', {})
        print(f"{os.path.basename(f)[:-5]:34s} {t.get('median_ms'):.4f} ms  {m.get('hbm_gbps', 0):7.0f} GB/s {m.get('tflops', 0):6.1f} TF/s splits={m.get('splits','-')} check={r['check']['passed']}")
    except Exception as e:
        print(os.path.basename(f), 'unreadable', e)
PY
cat $O/ab_summary.txt; grep -h "exit\|done at\|FAILED\|built" $O/gpu0.log $O/gpu1.log | grep -v "^[12]\..* exit 0 " | tail -20; grep -E "passed|failed|as expected|UNEXPECTED" $O/gc.log | tail -8
tar czf $OUT/c1.tgz -C /tmp c1
tar czf $OUT/cache.tgz -C /tmp cache 2>/dev/null; ls -la $OUT
