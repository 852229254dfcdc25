# Session 7, call 1 (2 GPUs), tree = main at ../SHA (07 on the Hopper kernel; 08's kernel moved to
# common/ws_forward.cuh). GPU 0: bench 07 (all variants, FlexAttention and SDPA in the same run).
# GPU 1: gpu-check 07 and 08 (check, stubs, sanitizers), then ctest's gpu tests of 07 and 08.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_GIT_SHA=$(cat ../SHA)
O=/tmp/c1; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 32 > $O/build.log 2>&1 || { tail -40 $O/build.log; echo BUILD FAILED; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0; timeout $(( 585 - $(el) )) python3 scripts/lab bench 07 --out $O/results > $O/bench07.log 2>&1; echo "bench 07 exit $? at $(el) s" ) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 200 python3 scripts/lab gpu-check --out $O/gc --sections 07 08 --only check stubs --deadline-s 195 > $O/gc-check.log 2>&1; echo "check+stubs 07 08 exit $? at $(el) s"
  timeout 260 python3 scripts/lab gpu-check --out $O/gcs --sections 07 08 --only sanitize --deadline-s 255 > $O/gc-sanitize.log 2>&1; echo "sanitize 07 08 exit $? at $(el) s"
  (cd build && timeout $(( 575 - $(el) )) ctest -L gpu -R "07|08" -E "check_" --output-on-failure > $O/ctest.log 2>&1); echo "ctest gpu 07 08 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
cat $O/gpu0.log $O/gpu1.log
sed -n '/== summary/,$p' $O/gc-check.log | tail -25; sed -n '/== summary/,$p' $O/gc-sanitize.log | tail -25; tail -8 $O/ctest.log; tail -30 $O/bench07.log
echo "all done at $(el) s"
tar czf $OUT/c1.tgz -C /tmp c1; ls -la $OUT
