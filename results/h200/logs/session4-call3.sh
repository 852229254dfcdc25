# Call 3 (session 4, the last), 2 GPUs. Trees: src = main (tile loader asks one address per
# 16-key group, queued timing, 08 ws --window), exp08b = 08 paged-pool reading every box's table
# entry before its copies.
# GPU 1: bench 05, bench 06 --no-baselines (05 vs 06 same run), check + sanitizers of 05 06, bench 07.
# GPU 0: build the rest; bench 08 (window vs FlexAttention, ws vs cuDNN, paged-pool); A/B src vs
#        exp08b (08 paged-pool), if time is left.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c3; mkdir -p $O/results $O/ab; cp results/h200/ncu.json $O/results/ncu.json
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src exp08b; do (cd ../$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps) > $O/cfg_$t.log 2>&1; done
cmake --build build --parallel 32 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; }
echo "built 05 06 at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=1
  timeout $(( 175 - $(el) )) python3 scripts/lab bench 05 --out $O/results; echo "bench 05 exit $? at $(el) s"
  timeout $(( 265 - $(el) )) python3 scripts/lab bench 06 --no-baselines --out $O/results; echo "bench 06 exit $? at $(el) s"
  timeout $(( 350 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only check sanitize --deadline-s $(( 340 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 05 06 exit $? at $(el) s"
  timeout $(( 578 - $(el) )) python3 scripts/lab bench 07 --out $O/results; echo "bench 07 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=0
  cmake --build build --parallel 24 --target 07_sliding_window 08_tma_skeleton >> $O/build.log 2>&1 || echo "BUILD FAILED"
  echo "built 07 08 at $(el) s"
  (cd ../exp08b && cmake --build build --parallel 8 --target 08_tma_skeleton) > $O/build_exp08b.log 2>&1 || echo "EXP08B BUILD FAILED" &
  timeout $(( 555 - $(el) )) python3 scripts/lab bench 08 --out $O/results; echo "bench 08 exit $? at $(el) s"
  wait
  ab() { local name=$1; shift; timeout 15 "$@" --json $O/ab/$name.json --quiet > $O/ab/$name.log 2>&1; echo "$name exit $?"; }
  P="--dtype bf16 --b 4 --t 4096 --h 32 --d 64 --warmup 5 --iters 20"
  for tree in src exp08b; do
    [ $(el) -lt 572 ] && ab $tree.08.pool.d64.p64 ../$tree/build/bin/08_tma_skeleton --variant paged-pool $P --page-size 64
  done
  [ $(el) -lt 574 ] && ab src.08.ws.d64 build/bin/08_tma_skeleton --variant ws $P
  echo "gpu0 done at $(el) s"
) > $O/gpu0.log 2>&1 &
wait
echo "all done at $(el) s"
python3 - <<EOF > $O/ab_summary.txt
import json, glob, os
for f in sorted(glob.glob('$O/ab/*.json')):
    try:
        r = json.load(open(f))[-1]; t = r['timing']; m = r.get('metrics', {})
        print(f"{os.path.basename(f)[:-5]:30s} {t.get('median_ms'):.4f} ms  {m.get('tflops', 0):6.1f} TF/s check={r['check']['passed']}")
    except Exception as e:
        print(os.path.basename(f), 'unreadable', e)
EOF
cat $O/ab_summary.txt; grep -h "exit\|done at\|FAILED\|wrote" $O/gpu0.log $O/gpu1.log | grep -v " exit 0$" | tail -14; grep -E "passed|failed|as expected|UNEXPECTED" $O/gc.log | tail -6
tar czf $OUT/c3.tgz -C /tmp c3
