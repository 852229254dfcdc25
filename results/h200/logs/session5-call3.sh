# (Re-created from the session's record after .gpu/call3.sh was removed; the command that ran.)
# Session 5, call 3 (2 GPUs). Trees: src = main (06 with a 6-stage ring, the candidate), st4 = the
# 4-stage 06 of call 2 (a96fb50), st5 = 5 stages, box = 08 with LAB_EXP_BOX_ROWS (box rows forced).
# GPU 0: bench 06 --ncu, bench 05 --ncu (src), then Nsight Compute --set full of 05 and 06 `single`.
# GPU 1: A/B 06 src/st4/st5 (two rounds), 08 box-size A/B, then gpu-check 06 (check, stubs,
#        sanitizers) and ctest same_as_05 on src.
# NOTE: the A/B's H did not pass --kv-lens, whose default is `random`: every "b8"/"b1" A/B row of
# this call is a mixed-length batch (05's rows too), not the equal-length shape its name says.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/c3; mkdir -p $O/results $O/ab $O/ncu; cp results/h200/ncu.json $O/results/ncu.json
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
DEPS=$PWD/.deps
for t in src st4 st5 box; do (cd ../$t && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$DEPS) > $O/cfg_$t.log 2>&1 & done; wait
cmake --build build --parallel 16 --target 05_decode 06_paged lab_05_decode lab_06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; exit 1; } &
for t in st4 st5; do (cd ../$t && cmake --build build --parallel 6 --target 06_paged) > $O/build_$t.log 2>&1 || echo "BUILD $t FAILED" & done
(cd ../box && cmake --build build --parallel 6 --target 08_tma_skeleton) > $O/build_box.log 2>&1 || echo "BUILD box FAILED" &
wait
echo "built at $(el) s"
export LAB_NO_BUILD=1
( export CUDA_VISIBLE_DEVICES=0
  timeout $(( 230 - $(el) )) python3 scripts/lab bench 06 --ncu --out $O/results; echo "bench 06 exit $? at $(el) s"
  timeout $(( 400 - $(el) )) python3 scripts/lab bench 05 --ncu --out $O/results; echo "bench 05 exit $? at $(el) s"
  S="--variant single --b 8 --h 32 --h-kv 8 --d 128 --t 1 --t-kv 32768 --kv-lens full --warmup 0 --iters 1 --check none --quiet"
  for s in 05_decode 06_paged; do
    X=""; [ $s = 06_paged ] && X="--page-size 16"
    timeout 60 ncu --set full -k regex:decode_kernel -c 1 -o $O/ncu/$s build/bin/$s $S $X > $O/ncu/$s.log 2>&1; echo "ncu $s exit $? at $(el) s"
    ncu -i $O/ncu/$s.ncu-rep --page details --csv > $O/ncu/${s}_details.csv 2>> $O/ncu/$s.log
    ncu -i $O/ncu/$s.ncu-rep --page source --csv --print-source sass > $O/ncu/${s}_sass.csv 2>> $O/ncu/$s.log
    rm -f $O/ncu/$s.ncu-rep
  done
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  ab() { local name=$1; shift; timeout 30 "$@" --json $O/ab/$name.json --quiet > $O/ab/$name.log 2>&1; echo "$name exit $? at $(el) s"; }
  H="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
  for rep in 1 2; do
    for t in src st4 st5; do
      B=../$t/build/bin
      ab $rep.$t.06.split.b8.32k   $B/06_paged --variant split  $H --b 8 --t-kv 32768 --page-size 16
      ab $rep.$t.06.single.b8.32k  $B/06_paged --variant single $H --b 8 --t-kv 32768 --page-size 16
      ab $rep.$t.06.split.mixed    $B/06_paged --variant split  $H --b 8 --t-kv 32768 --kv-lens random --page-size 16
      ab $rep.$t.06.split.b1.32k   $B/06_paged --variant split  $H --b 1 --t-kv 32768 --page-size 16
      ab $rep.$t.06.split.b8.1k    $B/06_paged --variant split  $H --b 8 --t-kv 1024 --page-size 16
    done
    ab $rep.src.05.split.b8.32k  build/bin/05_decode --variant split $H --b 8 --t-kv 32768
    ab $rep.src.05.split.mixed   build/bin/05_decode --variant split $H --b 8 --t-kv 32768 --kv-lens random
    P="--dtype bf16 --b 4 --t 4096 --h 16 --d 128 --warmup 5 --iters 20"
    B=../box/build/bin
    ab $rep.box.08.ws                  $B/08_tma_skeleton --variant ws $P
    ab $rep.box.08.pool.p128.box128    $B/08_tma_skeleton --variant paged-pool $P --page-size 128
    LAB_EXP_BOX_ROWS=64 ab $rep.box.08.pool.p128.box64 $B/08_tma_skeleton --variant paged-pool $P --page-size 128
    ab $rep.box.08.pool.p64            $B/08_tma_skeleton --variant paged-pool $P --page-size 64
  done
  echo "A/B done at $(el) s"
  timeout $(( 480 - $(el) )) python3 scripts/lab gpu-check --out $O/gc --sections 06 --only check stubs sanitize --deadline-s $(( 470 - $(el) )) > $O/gc.log 2>&1
  echo "gpu-check 06 exit $? at $(el) s"
  timeout $(( 560 - $(el) )) ctest --test-dir build -R "same_as_05|gpu.06" --output-on-failure > $O/ctest06.log 2>&1; echo "ctest 06 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
# (then: the A/B summary, the tails of the logs, and tar of /tmp/c3 into $OUT/c3.tgz)
