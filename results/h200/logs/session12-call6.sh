# Session 12, call 6 (1 GPU): A/B base (main, f04a6e0's kernel) vs src (../SHA: two warp sets of 4,
# each with its own ring; 05 2 stages a set, 06 3); base vs x3 (05 at 3 stages a set); check on src.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s12c6; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src base x3; do d=../$t; [ $t = src ] && d=.
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
done
(cmake --build build --parallel 6 --target 05_decode 06_paged > $O/build_src.log 2>&1 || { tail -30 $O/build_src.log; echo "src BUILD FAILED"; }) &
(cmake --build ../base/build --parallel 6 --target 05_decode 06_paged > $O/build_base.log 2>&1 || echo "base BUILD FAILED") &
(cmake --build ../x3/build --parallel 4 --target 05_decode > $O/build_x3.log 2>&1 || echo "x3 BUILD FAILED") &
wait; echo "built at $(el) s"
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
python3 scripts/lab ab ../base/build build --rounds 3 --out $O/ab1 \
  --case "05-b8-1k=05_decode --variant split --b 8 --t-kv 1024 $S" \
  --case "06-b8-1k=06_paged --variant split --b 8 --t-kv 1024 $S" \
  --case "05-b1-32k=05_decode --variant split --b 1 --t-kv 32768 $S" \
  --case "06-b1-32k=06_paged --variant split --b 1 --t-kv 32768 $S" \
  --case "05-b8-8k=05_decode --variant split --b 8 --t-kv 8192 $S" \
  --case "06-b8-8k=06_paged --variant split --b 8 --t-kv 8192 $S" \
  --case "05-mixed=05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S0" \
  --case "06-mixed=06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0" \
  --case "05-single-8k=05_decode --variant single --b 8 --t-kv 8192 $S" \
  --case "06-single-8k=06_paged --variant single --b 8 --t-kv 8192 $S" \
  > $O/ab-base-src.txt 2>&1
echo "ab1 exit $? at $(el) s"; cut -c1-170 $O/ab-base-src.txt
python3 scripts/lab ab ../base/build ../x3/build --rounds 3 --out $O/ab2 \
  --case "05-b8-1k=05_decode --variant split --b 8 --t-kv 1024 $S" \
  --case "05-b1-32k=05_decode --variant split --b 1 --t-kv 32768 $S" \
  > $O/ab-base-x3.txt 2>&1
echo "ab2 exit $? at $(el) s"; cut -c1-170 $O/ab-base-x3.txt
export LAB_NO_BUILD=1
R=$(( 400 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab check 05 06 --solution --require-gpu --jobs 4 > $O/check.log 2>&1
echo "check 05 06 --solution exit $? at $(el) s"; grep -E "passed|FAIL" $O/check.log | tail -5
for d in ab1 ab2; do find $O/$d -name '*.json' ! -name ab.json -delete; done
tar czf $OUT/s12c6.tgz -C /tmp s12c6
