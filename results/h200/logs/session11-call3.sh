# Session 11, call 3 (1 GPU): the grading example over the sections changed since its last full run
# (session 3) and not re-graded since: 04, 07, 08 (05/06 were re-graded in sessions 9 and 10; the
# planted bug and the hang are copies of 01, so 01 is graded for them). Tree at ../SHA.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s11c3; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
timeout 575 python3 scripts/lab grading-example --gpus 1 --sections 04 07 08 --out $O/grading > $O/grading.log 2>&1
echo "grading-example 04 07 08 exit $? at $(el) s"
tail -n 12 $O/grading.log
rm -rf $O/grading/submissions $O/grading/grades/*/build 2>/dev/null
find $O -name "*.o" -delete; du -sh $O
tar czf $OUT/s11c3.tgz -C /tmp s11c3; ls -la $OUT
