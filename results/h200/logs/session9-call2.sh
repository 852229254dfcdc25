# Session 9, call 2 (2 GPUs). Trees: src = main at ../SHA (cc1cadd: the shuffled group addresses in
# the tile loader), base = 7908c63 (session 8's kernels), late = src with the loads issued after
# the tile's compute (experiment).
# GPU 0: A/B base vs src on the bench shapes, A/B src vs late, bench 06.
# GPU 1: ncu instruction counts (src 05/06 at B = 8, 1k), gpu-check 06 05 (ctest, check, stubs, sanitizers), bench 05.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c2; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in base late; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
for t in base late; do (cmake --build ../$t/build --parallel 4 --target 05_decode 06_paged > $O/build_$t.log 2>&1 || echo "$t BUILD FAILED"; touch $O/built_$t) & done
cmake --build build --parallel 22 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
export LAB_NO_BUILD=1
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
( export CUDA_VISIBLE_DEVICES=0
  while [ ! -f $O/built_base ] || [ ! -f $O/built_late ]; do [ $(el) -gt 200 ] && break; sleep 2; done
  echo "exp trees built at $(el) s"
  timeout 200 python3 ../ab.py $O/ab1 3 ../base/build build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     05-b8-32k|05_decode --variant split --b 8 --t-kv 32768 $S ;;
     06-b8-32k|06_paged --variant split --b 8 --t-kv 32768 $S ;;
     05-mixed|05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
     06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
     05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
     05-b8-8k-single|05_decode --variant single --b 8 --t-kv 8192 $S ;;
     06-b8-8k-single|06_paged --variant single --b 8 --t-kv 8192 $S" > $O/ab1-base-src.txt 2>&1
  echo "ab1 exit $? at $(el) s"
  timeout 100 python3 ../ab.py $O/ab2 3 build ../late/build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S" > $O/ab2-src-late.txt 2>&1
  echo "ab2 exit $? at $(el) s"
  timeout $(( 560 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --variant split --warmup 3 --iters 3 --check none --quiet"
  M="gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio"
  for c in all none; do for s in 05_decode 06_paged; do
    timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 4 --launch-count 1 --metrics $M --cache-control $c --csv build/bin/$s $N > $O/ncu_$s-$c.log 2>&1
    timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 4 --launch-count 1 --metrics $M --cache-control $c --csv ../base/build/bin/$s $N > $O/ncu_base_$s-$c.log 2>&1
  done; done
  echo "ncu done at $(el) s"
  timeout 250 python3 scripts/lab gpu-check --out $O/gc --sections 06 05 --only ctest check stubs sanitize --deadline-s 245 > $O/gc.log 2>&1
  echo "gpu-check 06 05 exit $? at $(el) s"
  timeout $(( 560 - $(el) )) python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab1-base-src.txt $O/ab2-src-late.txt
for f in $O/ncu_*.log; do echo "== $(basename $f)"; grep -E '"(gpu__|dram__|lts__|sm__|smsp__)' $f | awk -F'","' '{print "  " $(NF-2), $NF}'; done
grep -E "^== (check|ctest)|passed,|UNEXPECTED|gpu-check:" $O/gc.log | tail -12
tail -n 3 $O/bench05.log; tail -n 3 $O/bench06.log
tar czf $OUT/s9c2.tgz -C /tmp s9c2; ls -la $OUT
