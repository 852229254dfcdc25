# Session 9, call 9 (1 GPU): ncu --set full with source counters of 05 and 06 split at B = 8, 1024 keys
# on cc1cadd (.gpu/src = 7a6bbaf, same kernels): where in the key loop 06's warps wait that 05's do not.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 CUDA_VISIBLE_DEVICES=0
O=/tmp/s9c9; mkdir -p $O
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > /dev/null 2>&1
cmake --build build --parallel 30 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
N="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 1024 --kv-lens full --variant split --warmup 3 --iters 3 --check none --quiet"
for s in 05_decode 06_paged; do
  timeout 90 ncu --clock-control none -k regex:decode_kernel --launch-skip 4 --launch-count 1 --set full --import-source yes --cache-control none -o $O/$s build/bin/$s $N > $O/ncu_$s.log 2>&1
  ncu --import $O/$s.ncu-rep --page source --csv --print-source sass > $O/$s.source.csv 2>&1
  ncu --import $O/$s.ncu-rep --page raw --csv > $O/$s.raw.csv 2>&1
done
rm -f $O/*.ncu-rep; ls -la $O
tar czf $OUT/s9c9.tgz -C /tmp s9c9
