# Session 15, call 6 (1 GPU): the lane window (branch exp/s15-lane-window): check 06 --solution and
# the 06 stub on it, its trace at B = 8 1k, and lab ab against 461aee4.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c6; mkdir -p $O
for t in src lw trlw; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 6 --target 05_decode 06_paged lab_06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in src lw trlw; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
( cd .gpu/lw && LAB_NO_BUILD=1 python3 scripts/lab check 06 --solution --require-gpu --jobs 4 > $O/check06.txt 2>&1; echo "check rc $?"; tail -3 $O/check06.txt
  LAB_NO_BUILD=1 python3 scripts/lab check 06 --require-gpu --jobs 4 > $O/check06-stub.txt 2>&1; echo "stub check rc $? (must fail)"; tail -4 $O/check06-stub.txt )
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
for rep in 1 2; do
  echo "== trlw 06 (rep $rep)"
  LAB_TRACE=20 .gpu/trlw/build/bin/06_paged $S --b 8 --t-kv 1024 --kv-lens full $P --warmup 5 --iters 30 2>&1 | grep -E "TRACE|time  "
done 2>&1 | tee $O/trace.txt
python3 scripts/lab ab .gpu/src/build .gpu/lw/build --rounds 5 --out $O/ab \
  --case "06-1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" \
  --case "06-mixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" \
  --case "06-b1-32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" \
  --case "06-1k-p64=06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 64" \
  --case "06-single-8k=06_paged --variant single --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 8192 --kv-lens full $P" \
  --case "05-1k=05_decode $S --b 8 --t-kv 1024 --kv-lens full" > $O/ab.txt 2>&1
tail -7 $O/ab.txt
tar czf $OUT/s15c6.tgz -C /tmp s15c6
