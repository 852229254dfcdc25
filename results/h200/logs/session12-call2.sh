# Session 12, call 2 (1 GPU): on the per-warp pipeline (base = 928f811), A/B against trees of ../SHA
# with 06's L2 prefetch 1, 2, 4 tiles ahead (pf1, pf2, pf4), 06 at 5 stages (s5), 05 with prefetch 2 (p05).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s12c2; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem,driver_version --format=csv,noheader
for t in base pf1 pf2 pf4 s5 p05; do
  cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
done
for t in base pf1 pf2 pf4 s5; do
  (cmake --build ../$t/build --parallel 3 --target 06_paged > $O/build_$t.log 2>&1 || { tail -20 $O/build_$t.log; echo "$t BUILD FAILED"; }) &
done
(cmake --build ../base/build --parallel 3 --target 05_decode > $O/build_base05.log 2>&1 || echo "base 05 BUILD FAILED") &
(cmake --build ../p05/build --parallel 3 --target 05_decode > $O/build_p05.log 2>&1 || { tail -20 $O/build_p05.log; echo "p05 BUILD FAILED"; }) &
wait; echo "built at $(el) s"
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
C06=(--case "06-b8-1k=06_paged --variant split --b 8 --t-kv 1024 $S"
     --case "06-b1-32k=06_paged --variant split --b 1 --t-kv 32768 $S"
     --case "06-b8-8k=06_paged --variant split --b 8 --t-kv 8192 $S"
     --case "06-mixed=06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0")
for t in pf2 s5 pf1 pf4; do
  python3 scripts/lab ab ../base/build ../$t/build --rounds 3 --out $O/ab-$t "${C06[@]}" > $O/ab-base-$t.txt 2>&1
  echo "ab base vs $t exit $? at $(el) s"; cut -c1-170 $O/ab-base-$t.txt
done
python3 scripts/lab ab ../base/build ../p05/build --rounds 3 --out $O/ab-p05 \
  --case "05-b8-1k=05_decode --variant split --b 8 --t-kv 1024 $S" \
  --case "05-b1-32k=05_decode --variant split --b 1 --t-kv 32768 $S" \
  --case "05-b8-8k=05_decode --variant split --b 8 --t-kv 8192 $S" \
  --case "05-mixed=05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S0" > $O/ab-base-p05.txt 2>&1
echo "ab base vs p05 exit $? at $(el) s"; cut -c1-170 $O/ab-base-p05.txt
for d in $O/ab-*/; do find $d -name '*.json' ! -name ab.json -delete; done
tar czf $OUT/s12c2.tgz -C /tmp s12c2
