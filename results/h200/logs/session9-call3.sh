# Session 9, call 3 (2 GPUs). Tree: src = main at ../SHA (cc1cadd, benched in call 2); inorder = src +
# LAB_POOL_ORDER (experiment). 1) Where 06's remaining gap at B = 8, 1024 keys comes from: Nsight
# Compute with the L2 left warm between launches (as the bench), 05 and 06 at 512/1024/1536 keys,
# 06 with its pool in order; bench-style timing with the L2 flushed before every run.
# 2) grading-example --gpus 2 over 05 and 06 (and 01's planted bug and hang).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s9c3; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../inorder -B ../inorder/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_inorder.log 2>&1
(cmake --build ../inorder/build --parallel 4 --target 06_paged > $O/build_inorder.log 2>&1 || echo "inorder BUILD FAILED") &
cmake --build build --parallel 26 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
wait
echo "built at $(el) s"
export LAB_NO_BUILD=1
M="gpu__time_duration.sum,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct"
nc() { local gpu=$1 name=$2; shift 2; CUDA_VISIBLE_DEVICES=$gpu timeout 60 ncu --clock-control none -k regex:decode_kernel --launch-skip 6 --launch-count 3 --metrics $M --cache-control none --csv "$@" > $O/ncu_$name.log 2>&1; }
N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 3 --iters 6 --check none --quiet"
( for kv in 512 1024 1536; do nc 0 05-$kv build/bin/05_decode $N --t-kv $kv; nc 0 06-$kv build/bin/06_paged $N --t-kv $kv; done ) &
( LAB_POOL_ORDER=sequential nc 1 06seq-1024 ../inorder/build/bin/06_paged $N --t-kv 1024
  LAB_POOL_ORDER=sequential nc 1 06seq-512 ../inorder/build/bin/06_paged $N --t-kv 512
  F="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 5 --iters 30"
  for r in 1 2 3; do for s in 05_decode 06_paged; do for fl in "" "--flush-l2"; do
    echo "$s $fl round $r: $(CUDA_VISIBLE_DEVICES=1 timeout 30 build/bin/$s $F --t-kv 1024 $fl 2>&1 | grep -E '^ *time')"; done; done; done > $O/flush.txt ) &
wait
echo "ncu and flush runs done at $(el) s"
timeout $(( 570 - $(el) )) python3 scripts/lab grading-example --gpus 2 --sections 05 06 --out $O/grading > $O/grading.log 2>&1
echo "grading-example exit $? at $(el) s"
for f in $O/ncu_*.log; do echo "== $(basename $f)"; grep -E '"(gpu__|dram__|lts__|smsp__)' $f | awk -F'","' '{print "  " $(NF-2), $NF}'; done
cat $O/flush.txt; tail -n 25 $O/grading.log
tar czf $OUT/s9c3.tgz --exclude=submissions --exclude='*.cubin' --exclude=build -C /tmp s9c3; ls -la $OUT
