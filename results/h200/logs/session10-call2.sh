# Session 10, call 2 (2 GPUs), tree src = main at ../SHA (c21ce9e).
# GPU 0: 05's split count at short lengths (call 1: at B = 8, 1024 keys, 4 splits, two blocks per SM,
# beat the planned 2 by 5%): forced counts against the plan, B = 1 and 8, D = 128 and 64.
# GPU 1: Nsight Compute DRAM bytes of 07 and 08 on today's kernels (results/h200/ncu.json was session 5's).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_NO_BUILD=1
O=/tmp/s10c2; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 30 --target 05_decode 06_paged 07_sliding_window 08_tma_skeleton > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; }
echo "built at $(el) s"
S0="--h 32 --h-kv 8 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
( export CUDA_VISIBLE_DEVICES=0
  timeout 420 python3 ../sweep.py $O/sw 3 build -- \
    "b8-1k|05_decode --variant split --b 8 --t-kv 1024 --d 128 $S|auto,2,3,4,6,8 ;;
     b8-2k|05_decode --variant split --b 8 --t-kv 2048 --d 128 $S|auto,4 ;;
     b8-4k|05_decode --variant split --b 8 --t-kv 4096 --d 128 $S|auto,4 ;;
     b8-8k|05_decode --variant split --b 8 --t-kv 8192 --d 128 $S|auto,4 ;;
     b8-16k|05_decode --variant split --b 8 --t-kv 16384 --d 128 $S|auto,4 ;;
     b8-mixed|05_decode --variant split --b 8 --t-kv 32768 --d 128 --kv-lens random $S0|auto,4 ;;
     b1-1k|05_decode --variant split --b 1 --t-kv 1024 --d 128 $S|auto,16 ;;
     b1-4k|05_decode --variant split --b 1 --t-kv 4096 --d 128 $S|auto,32 ;;
     b1-8k|05_decode --variant split --b 1 --t-kv 8192 --d 128 $S|auto,32 ;;
     b1-16k|05_decode --variant split --b 1 --t-kv 16384 --d 128 $S|auto,32 ;;
     b4-1k|05_decode --variant split --b 4 --t-kv 1024 --d 128 $S|auto,8 ;;
     b16-1k|05_decode --variant split --b 16 --t-kv 1024 --d 128 $S|auto,2 ;;
     b8-1k-d64|05_decode --variant split --b 8 --t-kv 1024 --d 64 $S|auto,4,8 ;;
     b8-8k-d64|05_decode --variant split --b 8 --t-kv 8192 --d 64 $S|auto,4,8" > $O/sweep-05.txt 2>&1
  echo "sweep exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 400 python3 - > $O/ncu-07-08.log 2>&1 <<'PY'
import importlib.machinery, importlib.util, json, sys
from pathlib import Path
loader = importlib.machinery.SourceFileLoader("lab", "scripts/lab")
spec = importlib.util.spec_from_loader("lab", loader); lab = importlib.util.module_from_spec(spec); loader.exec_module(lab)
dest = Path("/tmp/s10c2/ncu"); dest.mkdir(parents=True, exist_ok=True)
for s in ("07_sliding_window", "08_tma_skeleton"):
    data = json.loads((Path("tests/cases") / f"{s}.json").read_text())
    lab.measure_dram(s, data, dest, 180)
PY
  echo "ncu 07/08 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/sweep-05.txt $O/ncu-07-08.log
rm -rf $O/sw; tar czf $OUT/s10c2.tgz -C /tmp s10c2; ls -la $OUT
