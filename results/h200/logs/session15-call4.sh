# Session 15, call 4 (1 GPU): is a decode block's start instruction-fetch bound? Nsight Compute warp
# state sampling per SASS instruction (caches and clocks as in a normal run) of 05 and 06 at B = 8
# 1k, 461aee4; and F2 (06's window staging loop not unrolled: less code before the first copy,
# branch exp/s15-stage-unroll1) A/B against 461aee4.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c4; mkdir -p $O
for t in src f2; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 8 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in src f2; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
S="--variant split --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 1024 --kv-lens full"; P="--page-size 16"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for run in "05 05_decode" "06 06_paged $P"; do
  set -- $run; n=$1; shift
  timeout 120 $NCU --cache-control none --clock-control none -k regex:decode_kernel --launch-skip 10 --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section LaunchStats -o $O/ncu-$n -f \
    .gpu/src/build/bin/$@ $S --warmup 3 --iters 5 > $O/ncu-$n.log 2>&1
  $NCU -i $O/ncu-$n.ncu-rep --page details > $O/ncu-$n-details.txt 2>&1
  $NCU -i $O/ncu-$n.ncu-rep --page source --csv --print-source sass > $O/ncu-$n-sass.csv 2>&1
  echo "== $n"; grep -iE "stall|No Instruction|Warp Cycles" $O/ncu-$n-details.txt | head -20
done
python3 scripts/lab ab .gpu/src/build .gpu/f2/build --rounds 5 --out $O/ab \
  --case "06-1k=06_paged $S $P" \
  --case "06-mixed=06_paged --variant split --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 32768 --kv-lens random $P" > $O/ab.txt 2>&1
tail -3 $O/ab.txt
rm -f $O/*.ncu-rep.tmp; tar czf $OUT/s15c4.tgz -C /tmp s15c4
