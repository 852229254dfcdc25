# Session 15, call 1 (1 GPU): the full-array diagnostic of 06's B = 8 1024-key gap
# (results/h200/next/decode-full-length-array.experiment.patch on 461aee4), then the %globaltimer
# trace (next/decode-trace.py) of 05/06 with full and full-array lengths.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c1; mkdir -p $O
for t in fla flatr; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in fla flatr; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
S="--variant split --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 1024"; P="--page-size 16"
( cd .gpu/fla && python3 scripts/lab ab build build --rounds 5 --out $O/ab \
  --case "05-full-vs-array=05_decode $S --kv-lens full | 05_decode $S --kv-lens full-array" \
  --case "06-full-vs-array=06_paged $S --kv-lens full $P | 06_paged $S --kv-lens full-array $P" \
  --case "06-vs-05-array=05_decode $S --kv-lens full-array | 06_paged $S --kv-lens full-array $P" \
  ) > $O/ab.txt 2>&1
cat $O/ab.txt
cd .gpu/flatr
for rep in 1 2 3; do
  for lens in full-array; do
    for prog in "05_decode" "06_paged $P"; do
      echo "== $prog --kv-lens $lens (rep $rep)"
      LAB_TRACE=20 ./build/bin/$prog $S --kv-lens $lens --warmup 5 --iters 30 2>&1 | grep -E "TRACE|time  "
    done
  done
done 2>&1 | tee $O/trace.txt
tar czf $OUT/s15c1.tgz -C /tmp s15c1
