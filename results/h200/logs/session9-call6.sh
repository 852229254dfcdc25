# Session 9, call 6: which property of 05's fresh K/V copy loses the L2 reuse (B = 8, 512 keys, warm L2)?
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c6; mkdir -p $O
cmake -S ../copy05 -B ../copy05/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > /dev/null 2>&1
cmake --build ../copy05/build --parallel 24 --target 05_decode > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 3 --iters 6 --check none --t-kv 512"
nc() { local gpu=$1 name=$2; shift 2; env CUDA_VISIBLE_DEVICES=$gpu "$@" timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 6 --launch-count 2 --metrics $M --cache-control none --csv ../copy05/build/bin/05_decode $N > $O/ncu_$name.log 2>&1; }
( nc 0 orig; nc 0 whole LAB_COPY_KV=whole; nc 0 whole-exact LAB_COPY_KV=whole LAB_COPY_EXACT=1 ) &
( nc 1 whole-nopoison LAB_COPY_KV=whole LAB_COPY_NOPOISON=1; nc 1 whole-exact-nopoison LAB_COPY_KV=whole LAB_COPY_EXACT=1 LAB_COPY_NOPOISON=1; nc 1 host-exact-nopoison LAB_COPY_KV=whole LAB_COPY_HOST=1 LAB_COPY_EXACT=1 LAB_COPY_NOPOISON=1 ) &
wait
for f in $O/ncu_*.log; do echo "== $(basename $f) $(grep EXPERIMENT $f)"; grep -E '"(gpu__|dram__|lts__)' $f | awk -F'","' '{print "  " $(NF-2), $NF}'; grep -iE "error" $f | head -2; done
tar czf $OUT/s9c6.tgz -C /tmp s9c6
