# Session 14, call 4 (1 GPU, call 3's machine and y1 build): 06 against 05 inside y1 again, alternating,
# 5 rounds, at the two shapes where call 3's ratio was nearest 0.95 (B = 8 1k, the mixed batch).
cd .gpu/y1
export PYTHONUNBUFFERED=1 LAB_NO_BUILD=1
O=/tmp/s14c4; mkdir -p $O
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
pair() { echo "$1=05_decode $S $2 | 06_paged $S $2 $P"; }
timeout 150 python3 scripts/lab ab build build --rounds 5 --out $O/pair-y1-again \
  --case "$(pair 8x1k '--b 8 --t-kv 1024 --kv-lens full')" --case "$(pair 8xmixed '--b 8 --t-kv 32768 --kv-lens random')" > $O/pair-y1-again.txt 2>&1
cat $O/pair-y1-again.txt
tar czf $OUT/s14c4.tgz -C /tmp s14c4
