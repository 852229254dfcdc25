# Session 13, call 6 (1 GPU): two L2-policy experiments against the tree (../SHA), lab ab, 3 rounds:
#  e2: every K/V cp.async marked L2::evict_first (streamed once per forward), 05 and 06;
#  e3: 06's block-table entries and kv_len read with an L2::evict_last policy (call 5's trace: 06's
#      first tile lands 0.6 us (B = 8 1k) to 1 us (B = 1 32k) after 05's).
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s13c6; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src e2 e3; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 5 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done; wait
ls .gpu/src/build/bin/06_paged .gpu/e2/build/bin/06_paged .gpu/e3/build/bin/06_paged || { tail -20 $O/build-*.log; exit 1; }
echo "built at $(el) s"
cd .gpu/src
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
cases() { for prog in "05_decode" "06_paged $P"; do n=${prog%%_*}
  echo "--case"; echo "$n-8x1k=$prog $S --b 8 --t-kv 1024 --kv-lens full"
  echo "--case"; echo "$n-1x32k=$prog $S --b 1 --t-kv 32768 --kv-lens full"
  echo "--case"; echo "$n-8xmixed=$prog $S --b 8 --t-kv 32768 --kv-lens random"; done; }
mapfile -t C < <(cases)
python3 scripts/lab ab build ../e3/build --rounds 3 --out $O/ab-e3 "${C[@]}" > $O/ab-e3.txt 2>&1
echo "e3 at $(el) s"; cat $O/ab-e3.txt
tar czf $OUT/s13c6.tgz -C /tmp s13c6
R=$(( 250 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab ab build ../e2/build --rounds 3 --out $O/ab-e2 "${C[@]}" > $O/ab-e2.txt 2>&1
echo "e2 at $(el) s"; cat $O/ab-e2.txt
tar czf $OUT/s13c6.tgz -C /tmp s13c6
