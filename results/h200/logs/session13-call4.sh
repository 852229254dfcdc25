# Session 13, call 4 (1 GPU): (1) 06 against 05 in one build, same run, alternating (lab ab with a
# '|' pair), 5 rounds at the short shapes, 3 at B = 8 32k / 128k; (2) experiment x2: 06 with a
# 2-stage ring per set (05's) against the tree's 3, 3 rounds.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_GIT_SHA=$(cat .gpu/SHA)
O=/tmp/s13c4; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src x2; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done; wait
ls .gpu/src/build/bin/05_decode .gpu/x2/build/bin/06_paged || { tail -20 $O/build-*.log; exit 1; }
echo "built at $(el) s"
B=.gpu/src/build; S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
pair() { echo "$1=05_decode $S $2 | 06_paged $S $2 $P"; }
cd .gpu/src
python3 scripts/lab ab build build --rounds 5 --out $O/pair-short \
  --case "$(pair 8x1k '--b 8 --t-kv 1024 --kv-lens full')" --case "$(pair 8x8k '--b 8 --t-kv 8192 --kv-lens full')" \
  --case "$(pair 8xmixed '--b 8 --t-kv 32768 --kv-lens random')" --case "$(pair 1x32k '--b 1 --t-kv 32768 --kv-lens full')" \
  --case "$(pair 1x128k '--b 1 --t-kv 131072 --kv-lens full --warmup 3 --iters 20')" > $O/pair-short.txt 2>&1
echo "pair short at $(el) s"; cat $O/pair-short.txt
tar czf $OUT/s13c4.tgz -C /tmp s13c4
python3 scripts/lab ab build build --rounds 3 --out $O/pair-long \
  --case "$(pair 8x32k '--b 8 --t-kv 32768 --kv-lens full')" \
  --case "$(pair 8x128k '--b 8 --t-kv 131072 --kv-lens full --warmup 3 --iters 20')" > $O/pair-long.txt 2>&1
echo "pair long at $(el) s"; cat $O/pair-long.txt
tar czf $OUT/s13c4.tgz -C /tmp s13c4
R=$(( 570 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab ab build ../x2/build --rounds 3 --out $O/ab-06-2stages \
  --case "8x1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" --case "1x32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" \
  --case "8xmixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" --case "8x8k=06_paged $S --b 8 --t-kv 8192 --kv-lens full $P" \
  --case "single8k=06_paged --variant single --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 8192 --kv-lens full $P" > $O/ab-06-2stages.txt 2>&1
echo "x2 at $(el) s"; cat $O/ab-06-2stages.txt
tar czf $OUT/s13c4.tgz -C /tmp s13c4
