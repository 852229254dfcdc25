# The first call for 06-prologue-ramp.experiment.patch (written in session 15, never run; ~150 s).
# Prepare here (not git apply: inside the ignored .gpu/ it applies nothing):
#   scripts/gpu-snapshot && git rev-parse --short HEAD > .gpu/SHA &&
#   rm -rf .gpu/ramp && mkdir -p .gpu/ramp && git archive HEAD -- CMakeLists.txt CMakePresets.json common solutions labs tests scripts | tar -x -C .gpu/ramp &&
#   (cd .gpu/ramp && patch -p1 < ../../results/h200/next/06-prologue-ramp.experiment.patch) && cp -r .deps .gpu/ramp/ &&
#   rm -rf .gpu/trramp && cp -r .gpu/ramp .gpu/trramp && python3 results/h200/next/decode-trace.py .gpu/trramp
# then: run "bash results/h200/next/06-prologue-ramp.call.sh" with carry [".gpu"].
# Question: does 06's first tile land sooner (session 15: 2.27 us after a block starts, 05's 1.60),
# and does the step get faster, when the prologue puts one round in flight instead of two?
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/ramp; mkdir -p $O
for t in src ramp trramp; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 5 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in src ramp trramp; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
S="--variant split --h 32 --h-kv 8 --d 128 --t 1"; P="--page-size 16"
for rep in 1 2; do
  echo "== trramp 06 (rep $rep)"
  LAB_TRACE=20 .gpu/trramp/build/bin/06_paged $S --b 8 --t-kv 1024 --kv-lens full $P --warmup 5 --iters 30 2>&1 | grep -E "TRACE|time  "
done 2>&1 | tee $O/trace.txt
python3 scripts/lab ab .gpu/src/build .gpu/ramp/build --rounds 5 --out $O/ab \
  --case "06-1k=06_paged $S --b 8 --t-kv 1024 --kv-lens full $P" \
  --case "06-mixed=06_paged $S --b 8 --t-kv 32768 --kv-lens random $P" \
  --case "06-b1-32k=06_paged $S --b 1 --t-kv 32768 --kv-lens full $P" \
  --case "06-1k-p64=06_paged $S --b 8 --t-kv 1024 --kv-lens full --page-size 64" \
  --case "06-single-8k=06_paged --variant single --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 8192 --kv-lens full $P" > $O/ab.txt 2>&1
tail -6 $O/ab.txt
tar czf $OUT/ramp.tgz -C /tmp ramp
