# Session 11, call 1 (1 GPU). Trees: src = main at ../SHA (6a866a3: the split merge in a cluster),
# base = a3e86a0 (the ticket merge). A/B base vs src; then src's check/stubs/sanitizers for 05 06.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s11c1; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src base; do d=../$t; [ $t = src ] && d=.
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
done
(cmake --build build --parallel 10 --target 05_decode 06_paged lab_05_decode lab_06_paged > $O/build_src.log 2>&1 || { tail -30 $O/build_src.log; echo "src BUILD FAILED"; }) &
(cmake --build ../base/build --parallel 6 --target 05_decode 06_paged > $O/build_base.log 2>&1 || echo "base BUILD FAILED") &
wait; echo "built at $(el) s"
export LAB_NO_BUILD=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
timeout 260 python3 ../ab.py $O/ab 3 ../base/build build -- \
  "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
   06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
   05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 $S ;;
   06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
   05-mixed|05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
   06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
   05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 $S ;;
   06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
   05-b1-128k|05_decode --variant split --b 1 --t-kv 131072 $S ;;
   06-b1-128k|06_paged --variant split --b 1 --t-kv 131072 $S ;;
   05-b1-4k|05_decode --variant split --b 1 --t-kv 4096 $S ;;
   05-b8-1k-d64|05_decode --variant split --b 8 --t-kv 1024 --h 32 --h-kv 8 --d 64 --t 1 --warmup 5 --iters 30 --kv-lens full" > $O/ab-base-src.txt 2>&1
echo "ab exit $? at $(el) s"; cat $O/ab-base-src.txt
timeout $(( 560 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 05 06 --only check stubs sanitize --deadline-s $(( 550 - $(el) )) > $O/gc.log 2>&1
echo "gpu-check 05 06 exit $? at $(el) s"
grep -E "^== |passed,|UNEXPECTED|gpu-check:|exit [0-9]+ in" $O/gc.log | tail -40
rm -rf $O/ab; tar czf $OUT/s11c1.tgz -C /tmp s11c1; ls -la $OUT
