# Session 9, call 5 (2 GPUs): why does 06 miss the L2 between repeated steps where 05 hits?
# copy05 = 05 reading K/V from a fresh, poisoned, 1/8-larger copy (LAB_COPY_KV=whole: one memcpy;
# pages: a memcpy per 16 tokens, as 06 fills its pool). 06 with one page per sequence (--page-size = kv_len).
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c5; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for d in . ../copy05; do cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > /dev/null 2>&1; done
(cmake --build ../copy05/build --parallel 8 --target 05_decode > $O/build_copy05.log 2>&1 || echo "copy05 BUILD FAILED") &
cmake --build build --parallel 20 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -20 $O/build.log; echo BUILD FAILED; exit 1; }
wait
echo "built at $(el) s"
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 3 --iters 6 --check none"
nc() { local gpu=$1 name=$2; shift 2; CUDA_VISIBLE_DEVICES=$gpu timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 6 --launch-count 2 --metrics $M --cache-control none --csv "$@" > $O/ncu_$name.log 2>&1; }
( for kv in 512 1024; do nc 0 05-$kv build/bin/05_decode $N --t-kv $kv; LAB_COPY_KV=whole nc 0 05copy-whole-$kv ../copy05/build/bin/05_decode $N --t-kv $kv; LAB_COPY_KV=pages nc 0 05copy-pages-$kv ../copy05/build/bin/05_decode $N --t-kv $kv; done ) &
( for kv in 512 1024; do nc 1 06-$kv build/bin/06_paged $N --t-kv $kv; nc 1 06-page$kv-$kv build/bin/06_paged $N --t-kv $kv --page-size $kv; nc 1 06-page64-$kv build/bin/06_paged $N --t-kv $kv --page-size 64; done ) &
wait
echo "ncu done at $(el) s"
for f in $O/ncu_*.log; do echo "== $(basename $f) $(grep -c EXPERIMENT $f)"; grep -E '"(gpu__|dram__|lts__)' $f | awk -F'","' '{print "  " $(NF-2), $NF}'; grep -iE "error|bad input" $f | head -2; done
tar czf $OUT/s9c5.tgz -C /tmp s9c5; ls -la $OUT
