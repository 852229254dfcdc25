# Session 7, call 3 (2 GPUs), tree = main at ../SHA (08 paged/paged-pool: page and row by a shift).
# GPU 0: bench 08 (the whole sweep). GPU 1: A/B paged and paged-pool, the tree vs d90da6e (the
# kernel before it moved to common/ws_forward.cuh); then check 08 + stubs, the sanitizers on 08,
# ctest's gpu tests of 08.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_GIT_SHA=$(cat ../SHA)
O=/tmp/c3; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../old -B ../old/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_old.log 2>&1
cmake --build ../old/build --parallel 6 --target 08_tma_skeleton > $O/build_old.log 2>&1 || { tail -20 $O/build_old.log; echo OLD BUILD FAILED; } &
cmake --build build --parallel 26 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; }
wait; echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0; timeout $(( 590 - $(el) )) python3 scripts/lab bench 08 --out $O/results > $O/bench08.log 2>&1; echo "bench 08 exit $? at $(el) s" ) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 130 python3 ../ab.py $O/ab 2 ../old/build build -- \
    "08-paged-d128-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p64-c|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 --causal ;;
     08-paged-d64-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-paged-d128-p128|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p48|08_tma_skeleton --variant paged --page-size 48 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-pool-d128-p64|08_tma_skeleton --variant paged-pool --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-pool-d128-p128|08_tma_skeleton --variant paged-pool --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-ws-d128|08_tma_skeleton --variant ws --b 4 --h 16 --t 4096 --d 128 --dtype bf16" > $O/ab.txt 2>&1
  echo "ab exit $? at $(el) s"
  timeout 200 python3 scripts/lab gpu-check --out $O/gc --sections 08 --only check stubs --deadline-s 195 > $O/gc-check.log 2>&1; echo "check+stubs 08 exit $? at $(el) s"
  timeout 150 python3 scripts/lab gpu-check --out $O/gcs --sections 08 --only sanitize --deadline-s 145 > $O/gc-sanitize.log 2>&1; echo "sanitize 08 exit $? at $(el) s"
  (cd build && timeout $(( 580 - $(el) )) ctest -L gpu -R "08|wgmma" -E "check_" --output-on-failure > $O/ctest.log 2>&1); echo "ctest gpu 08 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
cat $O/gpu0.log $O/gpu1.log $O/ab.txt
sed -n '/== summary/,$p' $O/gc-check.log | tail -6; sed -n '/== summary/,$p' $O/gc-sanitize.log | tail -14; tail -5 $O/ctest.log; tail -3 $O/bench08.log
echo "all done at $(el) s"
tar czf $OUT/c3.tgz -C /tmp c3; ls -la $OUT
