# Session 10, call 3 (2 GPUs). Trees: src = main at ../SHA (ce099fd; kernels of cc1cadd), x2 = src
# with 06's window holding each page's first-row offset (the student's kv_row_offset called once per
# page when the window is staged; one shared-memory read per 16-key group in the loop; edge tiles
# call kv_row_offset per row on the global table).
# GPU 0: A/B src vs x2. GPU 1: x2's check 06 --solution and the stub's check 06.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_NO_BUILD=1
O=/tmp/s10c3; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src x2; do d=../$t; [ $t = src ] && d=.
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
done
(cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build_src.log 2>&1 || echo "src BUILD FAILED") &
(cd ../x2 && cmake --build build --parallel 20 > $O/build_x2.log 2>&1 || echo "x2 BUILD FAILED") &
wait; echo "built at $(el) s"
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
( export CUDA_VISIBLE_DEVICES=0
  timeout 300 python3 ../ab.py $O/ab 3 build ../x2/build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-32k|06_paged --variant split --b 8 --t-kv 32768 $S ;;
     06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
     06-b1-128k|06_paged --variant split --b 1 --t-kv 131072 $S ;;
     06-b8-8k-single|06_paged --variant single --b 8 --t-kv 8192 $S ;;
     06-b8-1k-p64|06_paged --variant split --b 8 --t-kv 1024 --page-size 64 $S" > $O/ab-src-x2.txt 2>&1
  echo "ab exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  cd ../x2
  timeout 200 python3 scripts/lab check 06 --solution > $O/check06-solution.log 2>&1; echo "check 06 --solution exit $? at $(el) s"
  timeout 100 python3 scripts/lab check 06 > $O/check06-stub.log 2>&1; echo "check 06 (stub) exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab-src-x2.txt; tail -4 $O/check06-solution.log $O/check06-stub.log
rm -rf $O/ab; tar czf $OUT/s10c3.tgz -C /tmp s10c3; ls -la $OUT
