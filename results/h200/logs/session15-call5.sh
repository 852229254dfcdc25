# Session 15, call 5 (1 GPU): F3 (branch exp/s15-window-early: 06's table window read into
# registers first thing and stored after the block's setup) A/B against 461aee4, and its trace.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c5; mkdir -p $O
for t in src f3 trf3; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 6 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in src f3 trf3; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
/usr/local/cuda/bin/cuobjdump -sass .gpu/f3/build/bin/06_paged | gzip > $O/06_paged-f3.sass.gz
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
for rep in 1 2; do
  echo "== trf3 06 (rep $rep)"
  LAB_TRACE=20 .gpu/trf3/build/bin/06_paged $S --b 8 --t-kv 1024 --kv-lens full $P --warmup 5 --iters 30 2>&1 | grep -E "TRACE|time  "
done 2>&1 | tee $O/trace.txt
python3 scripts/lab ab .gpu/src/build .gpu/f3/build --rounds 5 --out $O/ab \
  --case "06-1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" \
  --case "06-mixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" \
  --case "06-b1-32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" \
  --case "06-1k-p64=06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 64" > $O/ab.txt 2>&1
tail -5 $O/ab.txt
tar czf $OUT/s15c5.tgz -C /tmp s15c5
