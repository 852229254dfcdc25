# Session 9, call 8 (1 GPU): %globaltimer traces (results/h200/next/decode-trace.py) of 05 and 06 split
# at B = 8, 1024 keys on cc1cadd: where 06's extra microsecond is (prologue, key loop, merge).
cd .gpu/tr
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 CUDA_VISIBLE_DEVICES=0
O=/tmp/s9c8; mkdir -p $O
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/../src/.deps > /dev/null 2>&1
cmake --build build --parallel 30 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
export LAB_TRACE=8
T="--h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --warmup 10 --iters 30 --variant split"
for r in 1 2; do for s in 05_decode 06_paged; do for kv in "--b 8 --t-kv 1024" "--b 1 --t-kv 32768"; do
  echo "== round $r $s $kv"; timeout 60 build/bin/$s $T $kv 2>&1 | grep -E "TRACE|time "; done; done; done | tee $O/traces.log
tar czf $OUT/s9c8.tgz -C /tmp s9c8
