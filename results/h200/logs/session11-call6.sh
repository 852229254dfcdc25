# Session 11, call 6 (1 GPU): A/B base (5c1c0b7 = a3e86a0's kernels) vs src (../SHA: 06's window of
# 16-key groups' first rows); then src's check 06 --solution.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s11c6; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src base; do d=../$t; [ $t = src ] && d=.
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
done
(cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build_src.log 2>&1 || { tail -30 $O/build_src.log; echo "src BUILD FAILED"; }) &
(cmake --build ../base/build --parallel 8 --target 05_decode 06_paged > $O/build_base.log 2>&1 || echo "base BUILD FAILED") &
wait; echo "built at $(el) s"
export LAB_NO_BUILD=1
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
timeout 120 python3 ../ab.py $O/ab 3 ../base/build build -- \
  "06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
   06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
   06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
   06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
   06-b8-1k-p64|06_paged --variant split --b 8 --t-kv 1024 --page-size 64 $S ;;
   05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S" > $O/ab-base-src.txt 2>&1
echo "ab exit $? at $(el) s"; cut -c1-160 $O/ab-base-src.txt
timeout $(( 200 - $(el) )) python3 scripts/lab check 06 --solution --require-gpu --jobs 4 > $O/check06.log 2>&1
echo "check 06 --solution exit $? at $(el) s"; grep -E "passed|FAIL" $O/check06.log | tail -3
rm -rf $O/ab; tar czf $OUT/s11c6.tgz -C /tmp s11c6
