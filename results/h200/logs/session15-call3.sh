# Session 15, call 3 (1 GPU): F1 = the prologue's group rows read from the table, copies issued
# before the window's barrier (branch exp/s15-prologue-from-table) against 461aee4: lab ab, and the
# 5-stamp %globaltimer trace of both at B = 8 1k full lengths (call 2 ran random lengths by mistake).
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c3; mkdir -p $O
for t in src f1 tr3 trf1; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 4 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in src f1 tr3 trf1; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
/usr/local/cuda/bin/cuobjdump -sass .gpu/src/build/bin/06_paged | gzip > $O/06_paged-461aee4.sass.gz
/usr/local/cuda/bin/cuobjdump -sass .gpu/f1/build/bin/06_paged | gzip > $O/06_paged-f1.sass.gz
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
for rep in 1 2; do
  for run in "tr3 05_decode" "tr3 06_paged $P" "trf1 06_paged $P" "trf1 05_decode"; do
    set -- $run; t=$1; shift
    echo "== $t $* (rep $rep)"
    LAB_TRACE=20 .gpu/$t/build/bin/$@ $S --b 8 --t-kv 1024 --kv-lens full --warmup 5 --iters 30 2>&1 | grep -E "TRACE|time  "
  done
done 2>&1 | tee $O/trace.txt
python3 scripts/lab ab .gpu/src/build .gpu/f1/build --rounds 5 --out $O/ab \
  --case "06-1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" \
  --case "05-1k=05_decode $S --b 8 --t-kv 1024 --kv-lens full" \
  --case "06-mixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" \
  --case "06-b1-32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" \
  --case "06-single-8k=06_paged --variant single --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 8192 --kv-lens full $P" > $O/ab.txt 2>&1
tail -8 $O/ab.txt
tar czf $OUT/s15c3.tgz -C /tmp s15c3
