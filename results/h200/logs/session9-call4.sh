# Session 9, call 4 (1 GPU used): is 06's missing L2 reuse between launches its ring depth (4 stages,
# one block per SM) rather than its paging? Nsight Compute, L2 warm between launches, B = 8, 512 and
# 1024 keys: s3 = 06 with 05's 3 stages; f4 = 05 with 06's 4 stages; src for reference.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c4; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src s3 f4; do d=$([ $t = src ] && echo . || echo ../$t); cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1; (cmake --build $d/build --parallel 10 --target 05_decode 06_paged > $O/build_$t.log 2>&1 || echo "$t BUILD FAILED") & done
wait
echo "built at $(el) s"
M="gpu__time_duration.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,launch__occupancy_limit_shared_mem,sm__ctas_launched.max"
N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 3 --iters 6 --check none --quiet"
nc() { local gpu=$1 name=$2; shift 2; CUDA_VISIBLE_DEVICES=$gpu timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 6 --launch-count 2 --metrics $M --cache-control none --csv "$@" > $O/ncu_$name.log 2>&1; }
( for kv in 512 1024; do nc 0 src05-$kv build/bin/05_decode $N --t-kv $kv; nc 0 src06-$kv build/bin/06_paged $N --t-kv $kv; done ) &
( for kv in 512 1024; do nc 1 s3-06-$kv ../s3/build/bin/06_paged $N --t-kv $kv; nc 1 f4-05-$kv ../f4/build/bin/05_decode $N --t-kv $kv; done ) &
wait
echo "ncu done at $(el) s"
for f in $O/ncu_*.log; do echo "== $(basename $f)"; grep -E '"(gpu__|dram__|lts__|launch__|sm__)' $f | awk -F'","' '{print "  " $(NF-2), $NF}'; done
tar czf $OUT/s9c4.tgz -C /tmp s9c4; ls -la $OUT
