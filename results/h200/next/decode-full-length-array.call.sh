# The first call for decode-full-length-array.experiment.patch (written in session 14, never run).
# Prepare here:  scripts/gpu-snapshot && git rev-parse --short HEAD > .gpu/SHA &&
#   rm -rf .gpu/fla && mkdir -p .gpu/fla && git archive HEAD -- CMakeLists.txt CMakePresets.json common solutions labs tests scripts | tar -x -C .gpu/fla &&
#   (cd .gpu/fla && git apply ../../results/h200/next/decode-full-length-array.experiment.patch) && cp -r .deps .gpu/fla/
# then: run "bash results/h200/next/decode-full-length-array.call.sh" with carry [".gpu"] (~150 s).
# Question: is 06's B = 8 1024-key gap the one L2 round trip (the length array) that 05 at full
# lengths does not make? If 05 full-array is ~0.5 us slower than 05 full, and 06 / 05 with both
# full-array is >= 0.95x, yes.
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/fla; mkdir -p $O
( cd .gpu/fla && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1 &&
  cmake --build build --parallel 16 --target 05_decode 06_paged > $O/build.log 2>&1 ) || { tail -30 $O/build.log; exit 1; }
cd .gpu/fla
S="--variant split --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 1024"; P="--page-size 16"
python3 scripts/lab ab build build --rounds 5 --out $O/ab \
  --case "05-full-vs-array=05_decode $S --kv-lens full | 05_decode $S --kv-lens full-array" \
  --case "06-full-vs-array=06_paged $S --kv-lens full $P | 06_paged $S --kv-lens full-array $P" \
  --case "06-vs-05-array=05_decode $S --kv-lens full-array | 06_paged $S --kv-lens full-array $P" \
  --case "06-vs-05-full=05_decode $S --kv-lens full | 06_paged $S --kv-lens full $P" > $O/ab.txt 2>&1
cat $O/ab.txt
tar czf $OUT/fla.tgz -C /tmp fla
