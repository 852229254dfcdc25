# Session 13, call 5 (1 GPU): where a decode step's time goes, 05 against 06 (the %globaltimer trace
# of results/h200/next/decode-trace.py, 4 stamps a block) at B = 8 1k, the mixed batch, B = 1 32k.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s13c5; mkdir -p $O
cd .gpu/tr
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -20 $O/build.log; exit 1; }
S="--variant split --h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
for shape in "--b 8 --t-kv 1024 --kv-lens full" "--b 8 --t-kv 32768 --kv-lens random" "--b 1 --t-kv 32768 --kv-lens full"; do
  for rep in 1 2 3; do
    for prog in "05_decode" "06_paged --page-size 16"; do
      echo "== $prog $shape (rep $rep)"
      LAB_TRACE=20 ./build/bin/$prog $S $shape 2>&1 | grep -E "TRACE|time  "
    done
  done
done 2>&1 | tee $O/trace.txt
tar czf $OUT/s13c5.tgz -C /tmp s13c5
