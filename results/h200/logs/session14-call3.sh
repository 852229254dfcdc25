# Session 14, call 3 (1 GPU, the machine of call 2, its y1 build kept): y1 (../SHA_Y1): bench 05,
# bench 06, then 06 against 05 inside y1, alternating, 5 rounds, with the time left.
cd .gpu/y1
export LAB_GIT_SHA=$(cat ../SHA_Y1) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_NO_BUILD=1
O=/tmp/s14c3; mkdir -p $O/results
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
ls build/bin/05_decode build/bin/06_paged || exit 1
timeout 150 python3 scripts/lab bench 05 --out $O/results > $O/bench05.log 2>&1; echo "bench 05 exit $? at $(el) s"
tar czf $OUT/s14c3.tgz -C /tmp s14c3
timeout 160 python3 scripts/lab bench 06 --out $O/results > $O/bench06.log 2>&1; echo "bench 06 exit $? at $(el) s"
tar czf $OUT/s14c3.tgz -C /tmp s14c3
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"; L="--warmup 3 --iters 20"
pair() { echo "$1=05_decode $S $2 | 06_paged $S $2 $P"; }
R=$(( 440 - $(el) )); [ $R -gt 30 ] && timeout $R python3 scripts/lab ab build build --rounds 5 --out $O/pair-y1 \
  --case "$(pair 8x1k '--b 8 --t-kv 1024 --kv-lens full')" --case "$(pair 8xmixed '--b 8 --t-kv 32768 --kv-lens random')" \
  --case "$(pair 1x32k '--b 1 --t-kv 32768 --kv-lens full')" --case "$(pair 8x8k '--b 8 --t-kv 8192 --kv-lens full')" \
  --case "$(pair 1x128k "--b 1 --t-kv 131072 --kv-lens full $L")" > $O/pair-y1.txt 2>&1
echo "pair at $(el) s"; cat $O/pair-y1.txt
tar czf $OUT/s14c3.tgz -C /tmp s14c3
