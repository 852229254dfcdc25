# Session 7, call 4 (2 GPUs, the last ~300 s of device time), tree = main at ../SHA (06: a block
# stages only the table entries its keys use). GPU 0: A/B 06 against 53e77b2, then bench 06.
# GPU 1: check 06 + stubs, sanitizers on 06, ctest gpu of 06 (same_as_05).
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_GIT_SHA=$(cat ../SHA)
O=/tmp/c4; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../old -B ../old/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_old.log 2>&1
cmake --build ../old/build --parallel 6 --target 06_paged > $O/build_old.log 2>&1 || { tail -20 $O/build_old.log; echo OLD BUILD FAILED; } &
cmake --build build --parallel 26 > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; }
wait; echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout 60 python3 ../ab.py $O/ab 2 ../old/build build -- \
    "06-b8-1k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k-mixed|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens random --warmup 5 --iters 30 ;;
     06-b1-32k|06_paged --variant split --b 1 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-32k|06_paged --variant split --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 5 --iters 30 ;;
     06-b8-8k-single|06_paged --variant single --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 8192 --kv-lens full --warmup 5 --iters 30" > $O/ab.txt 2>&1
  echo "ab exit $? at $(el) s"
  timeout $(( 245 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 100 python3 scripts/lab gpu-check --out $O/gc --sections 06 --only check stubs --deadline-s 95 > $O/gc-check.log 2>&1; echo "check+stubs 06 exit $? at $(el) s"
  timeout 70 python3 scripts/lab gpu-check --out $O/gcs --sections 06 --only sanitize --deadline-s 65 > $O/gc-sanitize.log 2>&1; echo "sanitize 06 exit $? at $(el) s"
  (cd build && timeout $(( 245 - $(el) )) ctest -L gpu -R "06" -E "check_" --output-on-failure > $O/ctest.log 2>&1); echo "ctest gpu 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
cat $O/gpu0.log $O/gpu1.log $O/ab.txt
sed -n '/== summary/,$p' $O/gc-check.log | tail -5; sed -n '/== summary/,$p' $O/gc-sanitize.log | tail -10; tail -5 $O/ctest.log; tail -3 $O/bench06.log
echo "all done at $(el) s"
tar czf $OUT/c4.tgz -C /tmp c4; ls -la $OUT
