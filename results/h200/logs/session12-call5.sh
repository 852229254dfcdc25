# Session 12, call 5 (1 GPU): a diagnostic on the tree at ../SHA: is 06's remaining gap the pages'
# scatter? 05 against 06 at page 16, 64 and 256 (a 16-key group is one page's either way), `split` and
# `single`, B = 1 32k and B = 8 1k; 3 runs each, alternating, median of each run's median.
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90
O=/tmp/s12c5; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg.log 2>&1
cmake --build build --parallel 16 --target 05_decode 06_paged > $O/build.log 2>&1 || { tail -30 $O/build.log; echo BUILD FAILED; exit 1; }
echo "built at $(el) s"
python3 - <<'P' 2>&1 | tee $O/page-size-diagnostic.txt
import json, subprocess, statistics, os
S = "--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30 --kv-lens full".split()
cases = []
for shape in (["--b", "1", "--t-kv", "32768"], ["--b", "8", "--t-kv", "1024"], ["--b", "8", "--t-kv", "8192"]):
    for var in ("split", "single"):
        cases.append((f"05 {var} {' '.join(shape)}", ["build/bin/05_decode", "--variant", var] + shape + S))
        for page in (16, 64, 256):
            cases.append((f"06 {var} {' '.join(shape)} page {page}", ["build/bin/06_paged", "--variant", var, "--page-size", str(page)] + shape + S))
times = {c[0]: [] for c in cases}
for rnd in range(3):
    for label, cmd in (cases if rnd % 2 == 0 else cases[::-1]):
        out = f"/tmp/s12c5/r.json"
        r = subprocess.run(cmd + ["--json", out, "--quiet"], capture_output=True, text=True, timeout=120)
        rec = json.load(open(out))
        assert r.returncode == 0 and rec["check"]["passed"], (label, r.returncode, r.stdout[-300:], r.stderr[-300:])
        times[label].append(rec["timing"]["median_ms"] * 1000)
base = None
for label, cmd in cases:
    m = statistics.median(times[label])
    if label.startswith("05"): base = m
    print(f"{label:40s} {m:9.2f} us  05/this {base / m:.3f}  runs {' '.join(f'{t:.2f}' for t in times[label])}")
P
echo "done at $(el) s"
tar czf $OUT/s12c5.tgz -C /tmp s12c5
