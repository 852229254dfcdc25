# Session 15, call 2 (1 GPU): where 06's first tile loses 0.6 us at B = 8 1k: a 5th %globaltimer
# stamp (the prologue's first copy issued), and the ring depth of either section (06 at 2 stages a
# set, 05 at 3) traced beside the tree's (05 2, 06 3). Trees: .gpu/tr3, tr06s2, tr05s3 (461aee4 + stamps).
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s15c2; mkdir -p $O
for t in tr3 tr06s2 tr05s3; do
  ( cd .gpu/$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg-$t.log 2>&1 &&
    cmake --build build --parallel 6 --target 05_decode 06_paged > $O/build-$t.log 2>&1 ) &
done
wait
for t in tr3 tr06s2 tr05s3; do test -x .gpu/$t/build/bin/06_paged || { tail -30 $O/build-$t.log; exit 1; }; done
S="--variant split --h 32 --h-kv 8 --d 128 --t 1 --b 8 --t-kv 1024 --warmup 5 --iters 30"; P="--page-size 16"
for rep in 1 2 3; do
  for run in "tr3 05_decode" "tr3 06_paged $P" "tr06s2 06_paged $P" "tr05s3 05_decode"; do
    set -- $run; t=$1; shift
    echo "== $t $* (rep $rep)"
    LAB_TRACE=20 .gpu/$t/build/bin/$@ $S 2>&1 | grep -E "TRACE|time  "
  done
done 2>&1 | tee $O/trace.txt
tar czf $OUT/s15c2.tgz -C /tmp s15c2
