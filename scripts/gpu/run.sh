#!/bin/bash
# GPU checks (../shared/GPU-CHECKS.md) in one call on the GPU machine; pack
# .gpu/bundle.tgz first with scripts/gpu/bundle.sh. Results under $OUT.
cd "$(dirname "$0")/../.." || exit 1
mkdir -p /tmp/g && tar -C /tmp/g -xzf .gpu/bundle.tgz && cp /tmp/g/_window.so python/prepshards/_window.so
exec > >(tee $OUT/log.txt) 2>&1
set -x
date; nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,memory.total --format=csv
nproc; grep -m1 "model name" /proc/cpuinfo; grep -o -w 'avx2\|avx512f\|avx512vbmi' /proc/cpuinfo | sort | uniq -c
ND=$(dirname "$(ldconfig -p | awk '/libnvidia-ml.so.1 /{print $NF; exit}')" 2>/dev/null)
for f in /usr/local/nvidia/lib64 /usr/lib/x86_64-linux-gnu $ND; do ls $f/libcuda.so.1 $f/libnvidia-ml.so.1 2>/dev/null; done
export PREPLD=/tmp/g/lib:/usr/local/nvidia/lib64:$ND
P() { LD_LIBRARY_PATH=$PREPLD /tmp/g/prep "$@"; }
P version
(cd bench/gpu && LD_LIBRARY_PATH=$PREPLD /tmp/g/gpu.test -test.v -test.count=1 2>&1) | tee $OUT/gputest.txt | tail -40
S=/tmp/shards-gpu
time P convert testdata/images $S --recipe resize=256,crop=224 --copies 2000 --workers 16 2>&1 | tail -3
du -sh $S
for i in 1 2; do P feed-test $S --json > $OUT/feed$i.json; echo "exit $?"; done
P feed-test $S; echo "exit $?"
P feed-test $S --readers 4; echo "exit $?"
P feed-test $S --direct --readers 4; echo "exit $?"
P feed-test $S --verify --need 2000/s | tail -25; echo "exit $?"
for mode in mem slow; do
  python3 scripts/gpu/train.py $mode 45 > $OUT/train_$mode.txt 2>&1 &
  TP=$!; sleep 12; cat $OUT/train_$mode.txt
  P gpu-watch --duration 30s --json > $OUT/watch_$mode.json & W1=$!
  P gpu-watch --duration 30s --pid $TP > $OUT/watchpid_$mode.txt; echo "pid watch exit $?"
  wait $W1; echo "watch $mode exit $?"; cat $OUT/watchpid_$mode.txt
  python3 -c "import json,sys; d=json.load(open('$OUT/watch_$mode.json')); d.pop('util',None); print(json.dumps(d)[:1500])"
  wait $TP; cat $OUT/train_$mode.txt
done
PYTHONPATH=python python3 scripts/gpu/reader.py $S
date
