# Session 10, call 1 (2 GPUs). Trees: src = main at ../SHA (c21ce9e), x1 = src with each whole
# tile's V copies issued after the next S = Q K^T (K copies before it), x3 = src with 06's ring at
# 3 stages (2 blocks per SM). GPU 0: A/B src vs x1. GPU 1: A/B src vs x3 with forced split counts at
# B = 8, 1024 keys (more blocks per SM where the ring allows it).
cd .gpu/src
export LAB_GIT_SHA=$(cat ../SHA) PYTHONUNBUFFERED=1 LAB_CUDA_ARCHITECTURES=90 LAB_NO_BUILD=1
O=/tmp/s10c1; mkdir -p $O
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
for t in src x1 x3; do d=..//$t; [ $t = src ] && d=.
  cmake -S $d -B $d/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$PWD/.deps > $O/cfg_$t.log 2>&1
  (cmake --build $d/build --parallel 10 --target 05_decode 06_paged > $O/build_$t.log 2>&1 || echo "$t BUILD FAILED") &
done; wait
echo "built at $(el) s"; grep -l FAILED $O/build_*.log && tail -30 $O/build_*.log
S0="--h 32 --h-kv 8 --d 128 --t 1 --warmup 5 --iters 30"
S="$S0 --kv-lens full"
( export CUDA_VISIBLE_DEVICES=0
  timeout 330 python3 ../ab.py $O/ab1 3 build ../x1/build -- \
    "05-b8-1k|05_decode --variant split --b 8 --t-kv 1024 $S ;;
     06-b8-1k|06_paged --variant split --b 8 --t-kv 1024 $S ;;
     05-b8-8k|05_decode --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     05-b8-32k|05_decode --variant split --b 8 --t-kv 32768 $S ;;
     06-b8-32k|06_paged --variant split --b 8 --t-kv 32768 $S ;;
     05-mixed|05_decode --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
     06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0 ;;
     05-b1-32k|05_decode --variant split --b 1 --t-kv 32768 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
     05-b1-128k|05_decode --variant split --b 1 --t-kv 131072 $S ;;
     06-b1-128k|06_paged --variant split --b 1 --t-kv 131072 $S ;;
     05-b8-8k-single|05_decode --variant single --b 8 --t-kv 8192 $S ;;
     06-b8-8k-single|06_paged --variant single --b 8 --t-kv 8192 $S" > $O/ab1-src-x1.txt 2>&1
  echo "ab1 exit $? at $(el) s"
) > $O/gpu0.log 2>&1 &
( export CUDA_VISIBLE_DEVICES=1
  timeout 330 python3 ../ab.py $O/ab3 3 build ../x3/build -- \
    "05-b8-1k-s2|05_decode --variant split --b 8 --t-kv 1024 --splits 2 $S ;;
     05-b8-1k-s3|05_decode --variant split --b 8 --t-kv 1024 --splits 3 $S ;;
     05-b8-1k-s4|05_decode --variant split --b 8 --t-kv 1024 --splits 4 $S ;;
     06-b8-1k-s2|06_paged --variant split --b 8 --t-kv 1024 --splits 2 $S ;;
     06-b8-1k-s3|06_paged --variant split --b 8 --t-kv 1024 --splits 3 $S ;;
     06-b8-1k-s4|06_paged --variant split --b 8 --t-kv 1024 --splits 4 $S ;;
     06-b8-8k|06_paged --variant split --b 8 --t-kv 8192 $S ;;
     06-b8-32k|06_paged --variant split --b 8 --t-kv 32768 $S ;;
     06-b1-32k|06_paged --variant split --b 1 --t-kv 32768 $S ;;
     06-mixed|06_paged --variant split --b 8 --t-kv 32768 --kv-lens random $S0" > $O/ab3-src-x3.txt 2>&1
  echo "ab3 exit $? at $(el) s"
) > $O/gpu1.log 2>&1 &
wait
echo "all done at $(el) s"
cat $O/gpu0.log $O/gpu1.log $O/ab1-src-x1.txt $O/ab3-src-x3.txt
rm -rf $O/ab1 $O/ab3; tar czf $OUT/s10c1.tgz -C /tmp s10c1; ls -la $OUT
