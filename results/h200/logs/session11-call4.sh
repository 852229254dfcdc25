# Session 11, call 4 (1 GPU): bench 05 then bench 06 on the tree at ../SHA (kernels of a3e86a0 =
# 8413201's SASS): one more same-machine sample of the rows at issue 5's line.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s11c4; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.mem --format=csv,noheader
timeout 250 python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
timeout $(( 520 - $(el) )) python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
tail -n 3 $O/bench05.log $O/bench06.log
tar czf $OUT/s11c4.tgz -C /tmp s11c4; ls -la $OUT
