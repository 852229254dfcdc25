# Session 6, call 3 (2 GPUs). Trees: src = main at ../SHA (08's kernels as benched in call 2, 0a31ad7);
# exp = e497ffc (exp/s6-lane-acquire: paged's acquires and copies spread over the producer warp's lanes).
# First an A/B of 08 paged (src vs exp) on GPU 0. If exp is >= 3% faster at page 64 and at page 128:
#   GPU 0 bench 08 in exp, GPU 1 gpu-check 08 (ctest, check, stubs, sanitizers) in exp.
# Otherwise: grading-example --gpus 2 in src (not run since session 3).
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c3; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake -S ../exp -B ../exp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_exp.log 2>&1
cmake --build build --parallel 16 --target 08_tma_skeleton > $O/build.log 2>&1 &
cmake --build ../exp/build --parallel 16 --target 08_tma_skeleton > $O/build_exp.log 2>&1 || { tail -30 $O/build_exp.log; exit 1; }
wait; echo "built 08 (src, exp) at $(el) s"
export LAB_NO_BUILD=1
CUDA_VISIBLE_DEVICES=0 timeout 120 python3 ../ab.py $O/ab08 2 build ../exp/build -- \
    "08-paged-d128-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p128|08_tma_skeleton --variant paged --page-size 128 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d64-p64|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 32 --t 4096 --d 64 --dtype bf16 ;;
     08-paged-d128-p16|08_tma_skeleton --variant paged --page-size 16 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-paged-d128-p64-c|08_tma_skeleton --variant paged --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 --causal ;;
     08-pool-d128-p64|08_tma_skeleton --variant paged-pool --page-size 64 --b 4 --h 16 --t 4096 --d 128 --dtype bf16 ;;
     08-ws-d128|08_tma_skeleton --variant ws --b 4 --h 16 --t 4096 --d 128 --dtype bf16" > $O/ab08.txt 2>&1
echo "ab 08 exit $? at $(el) s"; grep -v ": exit 0" $O/ab08.txt
WIN=$(python3 - $O/ab08.txt <<'PY'
import sys, re
r = {l.split()[0]: float(re.search(r"A/B\s+([0-9.]+)", l).group(1)) for l in open(sys.argv[1]) if "A/B" in l and "nan" not in l}
ok = all(k in r for k in ("08-paged-d128-p64", "08-paged-d128-p128"))
print("exp" if ok and r["08-paged-d128-p64"] >= 1.03 and r["08-paged-d128-p128"] >= 1.03 else "src")
PY
)
echo "winner: $WIN"
if [ "$WIN" = exp ]; then
  cd ../exp; export LAB_GIT_SHA=e497ffc
  cmake --build build --parallel 16 > $O/build_exp_all.log 2>&1 || echo "EXP BUILD FAILED"
  echo "built exp (all) at $(el) s"
  ( export CUDA_VISIBLE_DEVICES=0; timeout $(( 590 - $(el) )) python3 scripts/lab bench 08 --out $O/results; echo "bench 08 (exp) exit $? at $(el) s" ) > $O/gpu0.log 2>&1 &
  ( export CUDA_VISIBLE_DEVICES=1; timeout $(( 400 - $(el) )) python3 scripts/lab gpu-check --out $O/gc08 --sections 08 --only ctest check stubs sanitize --deadline-s $(( 395 - $(el) )) > $O/gc08.log 2>&1; echo "gpu-check 08 (exp) exit $? at $(el) s" ) > $O/gpu1.log 2>&1 &
  wait
  cat $O/gpu0.log $O/gpu1.log; sed -n '/== summary/,$p' $O/gc08.log | tail -20
else
  export LAB_GIT_SHA=$(cat ../SHA)
  cmake --build build --parallel 32 > $O/build_all.log 2>&1 || echo "BUILD FAILED"
  echo "built src (all) at $(el) s"
  timeout $(( 590 - $(el) )) python3 scripts/lab grading-example --out $O/grading --gpus 2 > $O/grading.log 2>&1
  echo "grading-example exit $? at $(el) s"; tail -25 $O/grading.log
fi
echo "all done at $(el) s"
tar czf $OUT/c3.tgz -C /tmp c3; ls -la $OUT
