# Session 14, call 2 (1 GPU): y1 = branch exp/s13-kv-stream-policy at ../SHA_Y1 (K/V evict_first
# kernel only where a forward's K/V exceed the L2; plain cp.async otherwise) against src (../SHA):
#  (a) lab ab src vs y1: 05/06 B = 8 1k 5 rounds (must not lose: plain copies there), 06 B = 1 32k,
#      06/05 mixed, 06 8k 3 rounds; (b) y1: check 05 06 --solution, sanitizers (incl. a streamed
#      shape) + stubs, ctest gpu 05/06.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s14c2; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
( cd .gpu/src && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-src.log 2>&1 &&
  cmake --build build --parallel 6 --target 05_decode 06_paged > $O/build-src.log 2>&1 ) &
( cd .gpu/y1 && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-y1.log 2>&1 &&
  cmake --build build --parallel 10 --target 05_decode 06_paged lab_05_decode lab_06_paged > $O/build-y1.log 2>&1 ) &
wait
ls .gpu/src/build/bin/06_paged .gpu/y1/build/bin/06_paged .gpu/y1/build/bin/lab_06_paged || { tail -30 $O/build-*.log; exit 1; }
echo "built at $(el) s"
cd .gpu/src
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
python3 scripts/lab ab build ../y1/build --rounds 5 --out $O/ab-y1-1k \
  --case "05-8x1k=05_decode $S --b 8 --t-kv 1024 --kv-lens full" --case "06-8x1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" > $O/ab-y1-1k.txt 2>&1
python3 scripts/lab ab build ../y1/build --rounds 3 --out $O/ab-y1 \
  --case "06-1x32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" --case "06-8xmixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" \
  --case "05-8xmixed=05_decode $S --b 8 --t-kv 32768 --kv-lens random" --case "06-8x8k=06_paged $S --b 8 --t-kv 8192 --kv-lens full $P" > $O/ab-y1.txt 2>&1
echo "(a) at $(el) s"; cat $O/ab-y1-1k.txt $O/ab-y1.txt
tar czf $OUT/s14c2.tgz -C /tmp s14c2
cd ../y1
export LAB_GIT_SHA=$(cat ../SHA_Y1) LAB_NO_BUILD=1
timeout 110 python3 scripts/lab check 05 06 --solution --require-gpu --jobs 4 > $O/check.log 2>&1
echo "check 05 06 exit $? at $(el) s"; grep -E "passed|FAIL" $O/check.log | tail -3
tar czf $OUT/s14c2.tgz -C /tmp s14c2
R=$(( 555 - $(el) )); timeout $R python3 scripts/lab gpu-check --out $O/gc --sections 05 06 --only sanitize stubs --deadline-s $((R-10)) > $O/gc.log 2>&1
echo "gpu-check 05 06 sanitize stubs exit $? at $(el) s"; grep -E "passed,|UNEXPECTED|gpu-check:|sanitize|memcheck|racecheck|synccheck" $O/gc.log | tail -40
tar czf $OUT/s14c2.tgz -C /tmp s14c2
R=$(( 590 - $(el) )); [ $R -gt 20 ] && timeout $R ctest --test-dir build -L gpu -R "0[56]_" -E "\.check_" -j 4 --output-on-failure > $O/ctest.log 2>&1
echo "ctest gpu 05/06 exit $? at $(el) s"; tail -n 4 $O/ctest.log
tar czf $OUT/s14c2.tgz -C /tmp s14c2
