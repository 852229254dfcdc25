# Session 9, call 1 (2 GPUs): measure 06 vs 05 at B = 8, 1024 keys before coding.
# Trees: src = main at ../SHA; inorder = src + LAB_POOL_ORDER (experiment: the pool's blocks in order);
# s3 = src with 06's ring at 3 stages. GPU 0: A/B src vs inorder (sequential, interleaved), src vs s3.
# GPU 1: ncu --set full of 05 and 06 split (warm L2, as the bench), DRAM/L2 of both with cold L2.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c1; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
for t in inorder s3; do cmake -S ../$t -B ../$t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; done
for t in inorder s3; do (cmake --build ../$t/build --parallel 4 --target 05_decode 06_paged > $O/build_$t.log 2>&1 || echo "$t BUILD FAILED"; touch $O/built_$t) & done
cmake --build build --parallel 22 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built src at $(el) s"
S="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30 --kv-lens full"
( export CUDA_VISIBLE_DEVICES=0
  while [ ! -f $O/built_inorder ] || [ ! -f $O/built_s3 ]; do [ $(el) -gt 200 ] && break; sleep 2; done
  echo "exp trees built at $(el) s"
  LAB_POOL_ORDER=sequential timeout 150 python3 ../ab.py $O/ab1 3 build ../inorder/build -- \
    "06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k-flush|06_paged --variant split --b 8 --t-kv 1024 --flush-l2 $S ;;
     05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
     05-b8-1k-flush|05_decode --variant split --b 8 --t-kv 1024 --flush-l2 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-8k-single|06_paged --variant single --b 8 --t-kv 8192 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S" > $O/ab1-sequential.txt 2>&1
  echo "ab1 exit $? at $(el) s"
  LAB_POOL_ORDER=interleaved timeout 60 python3 ../ab.py $O/ab2 3 build ../inorder/build -- \
    "06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k-flush|06_paged --variant split --b 8 --t-kv 1024 --flush-l2 $S" > $O/ab2-interleaved.txt 2>&1
  echo "ab2 exit $? at $(el) s"
  timeout 80 python3 ../ab.py $O/ab3 3 build ../s3/build -- \
    "06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k-flush|06_paged --variant split --b 8 --t-kv 1024 --flush-l2 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S" > $O/ab3-s3.txt 2>&1
  echo "ab3 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --variant split --warmup 3 --iters 3 --check none --quiet"
  nc() { local name=$1; shift; timeout 90 ncu --clock-control none -k regex:decode_kernel --launch-skip 4 --launch-count 1 "$@" > $O/ncu_$name.log 2>&1; echo "ncu $name exit $? at $(el) s"; }
  nc 05 --set full --import-source yes --cache-control none -o $O/ncu05 build/bin/05_decode $N
  nc 06 --set full --import-source yes --cache-control none -o $O/ncu06 build/bin/06_paged $N
  LAB_POOL_ORDER=sequential nc 06seq --set full --cache-control none -o $O/ncu06seq ../inorder/build/bin/06_paged $N
  M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
  for c in all none; do
    nc 05-$c --metrics $M --cache-control $c --csv build/bin/05_decode $N
    nc 06-$c --metrics $M --cache-control $c --csv build/bin/06_paged $N
  done
  for r in 05 06 06seq; do
    [ -f $O/ncu$r.ncu-rep ] || continue
    ncu --import $O/ncu$r.ncu-rep --page details --csv > $O/ncu$r.details.csv 2>&1
    ncu --import $O/ncu$r.ncu-rep --page raw --csv > $O/ncu$r.raw.csv 2>&1
    ncu --import $O/ncu$r.ncu-rep --page source --csv --print-source sass > $O/ncu$r.source.csv 2>&1 || echo "source page $r failed"
  done
  echo "ncu done at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab1-sequential.txt $O/ab2-interleaved.txt $O/ab3-s3.txt
for f in $O/ncu_0*-all.log $O/ncu_0*-none.log; do echo "== $f"; grep -E '"(gpu__|dram__|lts__|sm__)' $f | awk -F'","' '{print $(NF-2), $NF}'; done
tar czf $OUT/s9c1.tgz -C /tmp s9c1; ls -la $OUT
