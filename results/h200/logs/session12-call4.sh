# Session 12, call 4 (1 GPU): the tree at ../SHA: compute-sanitizer on 06 (memcheck, racecheck, synccheck),
# whose synccheck runs call 3's deadline cut off.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s12c4; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 06_paged lab_06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
export LAB_NO_BUILD=1
timeout 300 python3 scripts/lab gpu-check --out $O/gc --sections 06 --only sanitize --deadline-s 290 > $O/gc.log 2>&1
echo "gpu-check 06 sanitize exit $? at $(el) s"; grep -E "gpu-check:|UNEXPECTED" $O/gc.log | tail -3
python3 -c "import json; d=json.load(open('$O/gc/gpu-check-summary.json')); print(len(d), 'steps, nonzero:', [k for k,v in d.items() if v])"
tar czf $OUT/s12c4.tgz -C /tmp s12c4
