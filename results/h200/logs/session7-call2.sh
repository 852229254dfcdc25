# Session 7, call 2 (2 GPUs), tree = main at ../SHA. GPU 0: bench 08 (the whole sweep; --resume in
# call 3 if the time limit cuts it). GPU 1: (1) bench 08 --tag paged-compare: ws, paged and
# paged-pool on the paged shapes in one run (paged's SASS changed when the kernel moved to
# common/ws_forward.cuh: +48 instructions in its producer); (2) A/B 08 paged, lane 0 owning no box
# (exp08) vs the tree; (3) A/B 05/06 split, the first tiles from the global table (exp06, branch
# exp/s6-06-prologue) vs the tree.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_GIT_SHA=$(cat ../SHA)
O=/tmp/c2; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../exp08 -B ../exp08/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg08.log 2>&1
cmake -S ../exp06 -B ../exp06/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg06.log 2>&1
cmake --build build --parallel 24 --target 05_decode 06_paged 08_tma_skeleton > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; } &
cmake --build ../exp08/build --parallel 8 --target 08_tma_skeleton > $O/build08.log 2>&1 || { tail -30 $O/build08.log; echo EXP08 BUILD FAILED; } &
cmake --build ../exp06/build --parallel 8 --target 05_decode 06_paged > $O/build06.log 2>&1 || { tail -30 $O/build06.log; echo EXP06 BUILD FAILED; } &
wait; echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0; timeout $(( 588 - $(el) )) python3 scripts/lab bench 08 --out $O/results > $O/bench08.log 2>&1; echo "bench 08 exit $? at $(el) s" ) > $O/gpu0.log 2>&1 &
export CUDA_VISIBLE_DEVICES=1
timeout 200 python3 scripts/lab bench 08 --tag paged-compare --out $O/results-pc > $O/bench08-paged-compare.log 2>&1; echo "bench 08 paged-compare exit $? at $(el) s"
timeout 150 python3 ../ab.py $O/ab08 2 build ../exp08/build -- \
    "08-paged-d128-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p64-c|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 --causal ;;
     08-paged-d64-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-paged-d128-p128|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p128-c|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 --causal ;;
     08-paged-d128-p16|08_tma_skeleton --variant paged --page-size 16 --b 4 --h 16 --t 4096 --d 128 --dtype bf16" > $O/ab08.txt 2>&1
echo "ab 08 exit $? at $(el) s"
timeout $(( 560 - $(el) )) python3 ../ab.py $O/ab06 2 build ../exp06/build -- \
    "05-b1-32k|05_decode --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     05-b8-1k|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-1k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-mixed|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     05-b8-32k-mixed|05_decode --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b1-32k|06_paged --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30" > $O/ab06.txt 2>&1
echo "ab 05/06 exit $? at $(el) s"
wait
cat $O/gpu0.log; cat $O/ab08.txt $O/ab06.txt | grep -v ": exit 0"; tail -25 $O/bench08-paged-compare.log; tail -5 $O/bench08.log
echo "all done at $(el) s"
tar czf $OUT/c2.tgz -C /tmp c2; ls -la $OUT
