# Session 9, call 7: bench-style timing (30 queued runs, median; 3 rounds) at B = 8, 1024 keys:
# 05 on the harness's K/V, 05 on a fresh copy of them (copy05, LAB_COPY_KV=whole, exact, no poison), 06.
cd .gpu/src
export PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 CUDA_VISIBLE_DEVICES=0
O=/tmp/s9c7; mkdir -p $O
for d in . ../copy05; do cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > /dev/null 2>&1; done
(cmake --build ../copy05/build --parallel 12 --target 05_decode > $O/b1.log 2>&1) & cmake --build build --parallel 16 --target 06_paged > $O/b2.log 2>&1; wait
F="--b 8 --h 32 --h-kv 8 --d 128 --t 1 --kv-lens full --variant split --warmup 5 --iters 30 --t-kv 1024"
t() { timeout 30 env "$@" 2>&1 | grep -E '^ *time' | awk '{print $2}'; }
for r in 1 2 3; do
  echo "round $r: 05 $(t X=1 ../copy05/build/bin/05_decode $F) | 05-copy $(t LAB_COPY_KV=whole LAB_COPY_EXACT=1 LAB_COPY_NOPOISON=1 ../copy05/build/bin/05_decode $F) | 06 $(t X=1 build/bin/06_paged $F)"
done | tee $O/times.txt
tar czf $OUT/s9c7.tgz -C /tmp s9c7
