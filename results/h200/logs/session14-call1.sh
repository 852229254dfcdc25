# Session 14, call 1 (1 GPU): x1 = K/V copies L2::evict_first only where a forward's K/V exceed the
# L2 (branch exp/s13-kv-stream-policy) against the tree (src = ../SHA):
#  (a) lab ab x1 vs src, 3 rounds, 05 and 06 at B = 8 1k, 8k, mixed, B = 1 32k, 128k, single 8k;
#  (b) 06 against 05 inside x1, alternating, 5 rounds; (c) diagnostic: 06 page 16 vs page 1024 at
#  B = 8 1k inside x1 (does the page scatter cost the 1k gap?); (d) x1 vs src at B = 8 32k, 128k.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s14c1; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src x1; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done; wait
ls .gpu/src/build/bin/06_paged .gpu/x1/build/bin/06_paged || { tail -20 $O/build-*.log; exit 1; }
echo "built at $(el) s"
cd .gpu/src
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"; L="--warmup 3 --iters 20"
cases() { for prog in "05_decode" "06_paged $P"; do n=${prog%%_*}
  echo "--case"; echo "$n-8x1k=$prog $S --b 8 --t-kv 1024 --kv-lens full"
  echo "--case"; echo "$n-8x8k=$prog $S --b 8 --t-kv 8192 --kv-lens full"
  echo "--case"; echo "$n-8xmixed=$prog $S --b 8 --t-kv 32768 --kv-lens random"
  echo "--case"; echo "$n-1x32k=$prog $S --b 1 --t-kv 32768 --kv-lens full"
  echo "--case"; echo "$n-1x128k=$prog $S --b 1 --t-kv 131072 --kv-lens full $L"
  echo "--case"; echo "$n-single8k=$prog --variant single --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 8192 --kv-lens full"; done; }
mapfile -t C < <(cases)
python3 scripts/lab ab build ../x1/build --rounds 3 --out $O/ab-x1 "${C[@]}" > $O/ab-x1.txt 2>&1
echo "(a) at $(el) s"; cat $O/ab-x1.txt
tar czf $OUT/s14c1.tgz -C /tmp s14c1
pair() { echo "$1=05_decode $S $2 | 06_paged $S $2 $P"; }
X=../x1/build
python3 scripts/lab ab $X $X --rounds 5 --out $O/pair-x1 \
  --case "$(pair 8x1k '--b 8 --t-kv 1024 --kv-lens full')" --case "$(pair 8x8k '--b 8 --t-kv 8192 --kv-lens full')" \
  --case "$(pair 8xmixed '--b 8 --t-kv 32768 --kv-lens random')" --case "$(pair 1x32k '--b 1 --t-kv 32768 --kv-lens full')" \
  --case "$(pair 1x128k "--b 1 --t-kv 131072 --kv-lens full $L")" > $O/pair-x1.txt 2>&1
echo "(b) at $(el) s"; cat $O/pair-x1.txt
tar czf $OUT/s14c1.tgz -C /tmp s14c1
python3 scripts/lab ab $X $X --rounds 3 --out $O/diag-page \
  --case "p16-p1024=06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 16 | 06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 1024" \
  --case "05-p1024=05_decode $S --b 8 --t-kv 1024 --kv-lens full | 06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 1024" > $O/diag-page.txt 2>&1
echo "(c) at $(el) s"; cat $O/diag-page.txt
tar czf $OUT/s14c1.tgz -C /tmp s14c1
R=$(( 580 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab ab build ../x1/build --rounds 3 --out $O/ab-x1-long \
  --case "05-8x32k=05_decode $S --b 8 --t-kv 32768 --kv-lens full" --case "06-8x32k=06_paged $S --b 8 --t-kv 32768 --kv-lens full $P" \
  --case "05-8x128k=05_decode $S --b 8 --t-kv 131072 --kv-lens full $L" --case "06-8x128k=06_paged $S --b 8 --t-kv 131072 --kv-lens full $P $L" > $O/ab-x1-long.txt 2>&1
echo "(d) at $(el) s"; cat $O/ab-x1-long.txt
tar czf $OUT/s14c1.tgz -C /tmp s14c1
