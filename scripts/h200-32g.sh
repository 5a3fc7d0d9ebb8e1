#!/usr/bin/env bash
# The production-size run of docs/BENCHMARKS.md ("32 GiB on the H200"), on a
# GPU machine without Rust. Carried there in one directory (built on a build
# machine, see the section's "How"):
#   bench-filecoin, bench-latency, kiln, gpu_check (gzipped binaries), gpu_test
#   (the kiln-groth16 `gpu` test binary: cargo test --release -p kiln-groth16 --test gpu --no-run),
#   gpu_fault (its `gpu_fault` test binary, the same way; optional)
#   in2k/*.json     2 KiB payloads (cargo xtask gen-vanilla --sector-size 2KiB --sparse)
#   in32/*.json.gz  32 GiB payloads (cargo xtask gen-vanilla --sector-size 32GiB)
# Steps (each skippable, the machine's time is short):
#   check    the fixed-base kernel against blstrs, GPU test-setup proofs = CPU proofs,
#            a real CUDA fault (gpu_fault)
#   pasta    Pallas/Vesta MSMs and Pasta NTTs against pasta_curves (gpu_check --pasta-only --quick)
#   pasta-bench  Pallas MSMs 2^20..2^26 and Pasta NTTs beside halo2_proofs on
#            every host core (gpu_bench pasta-ntt pallas; needs gpu_bench)
#   small    the four kinds at 2 KiB against test setups made on the GPU
#   big      32 GiB WinningPoSt and PoRep C2 against test setups, one proof each
#   synth    32 GiB synthesis alone on the host CPU (SYNTH_KINDS, default porep):
#            the recording, then witness-only runs, gadget and native paths
#   steady   32 GiB PoRep C2: one proof, then N jobs at once in the same warm
#            engine (STEADY, default 3): proofs per hour and GPU busy
#   rest     32 GiB WindowPoSt and SnapDeals (REST_KINDS), one proof each
#            (REST_WARMUP=1: a cold one first, so the timed one is warm)
#   latency  WinningPoSt/WindowPoSt latency under a full PoRep/SnapDeals load, 2 KiB
#   latency32  32 GiB WinningPoSt latency under a full 32 GiB PoRep load
#            (isolated mode only: LAT_SAMPLES, LAT_BULK jobs in flight, MEMBUDGET_GIB)
#   ptx      the kernels JIT-compiled from the fatbin's PTX (CUDA_FORCE_PTX_JIT=1)
#            against the CPU: what a GPU newer than every machine-code target runs
#   faults   KILN_FAULTS on the GPU backend: a daemon with injected errors and
#            wrong results proves 24 synthetic jobs (every answer verified);
#            then a hang and a sticky fault quarantine the only GPU and the
#            daemon exits non-zero
# Usage: ./h200-32g.sh check small big      (results under $OUT, default ./results)
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-$PWD/results}
mkdir -p "$OUT"
export FIL_PROOFS_PARENT_CACHE=/tmp/kiln-parents
for f in *.gz in32/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
chmod +x ./bench-filecoin ./bench-latency ./kiln ./gpu_check ./gpu_test ./gpu_bench ./gpu_fault 2>/dev/null
t0=$(date +%s)
stamp() { echo "== +$(( $(date +%s) - t0 ))s $*"; }
# A step's time limit: its own, or what is left of BUDGET seconds (the
# device's per-call limit, default 590), whichever is shorter.
lim() { local left=$(( ${BUDGET:-590} - ($(date +%s) - t0) - 5 )); (( left < $1 )) && echo $(( left > 1 ? left : 1 )) || echo "$1"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc; free -g | head -2
# Memory and load every MEM_EVERY (default 20) s, for the whole call.
# Per kiln process: resident memory and how many of its threads are running
# (R) or in uninterruptible sleep (D): a stall shows as 0 running.
procs() {
  for p in $(pgrep -f 'bench-filecoin|bench-latency|kiln serve' 2>/dev/null); do
    local st; st=$(cat /proc/$p/task/*/stat 2>/dev/null | awk '{print $3}' | sort | uniq -c | tr -s ' \n' ' ')
    # The running ones by name: which thread spins when nothing moves.
    local run; run=$(for t in /proc/$p/task/*; do [ "$(awk '{print $3}' $t/stat 2>/dev/null)" = R ] && cat $t/comm; done 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')
    echo -n " [$p rss $(awk '/VmRSS/{printf "%.1fG", $2/1048576}' /proc/$p/status 2>/dev/null) threads:$st running:$run]"
  done
}
# VRAM in use every 2 s (its peak is what a smaller card must hold).
( while sleep ${MEM_EVERY:-20}; do echo "$(date +%T) $(free -g | awk '/Mem:/{print $3}')G used, load $(cut -d' ' -f1 /proc/loadavg)$(procs)"; done ) > "$OUT/mem.txt" 2>&1 &
sampler=$!
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader -l 2 > "$OUT/vram.txt" 2>&1 &
vram=$!
trap 'kill $sampler $vram 2>/dev/null' EXIT
for step in "$@"; do
  case "$step" in
  check)
    stamp "fixed-base kernel"
    timeout $(lim 240) ./gpu_check --setup-only > "$OUT/gpu_check.txt" 2>&1; echo "rc=$?"; tail -4 "$OUT/gpu_check.txt"
    stamp "GPU proofs = CPU proofs, test setups included"
    timeout $(lim 240) ./gpu_test --test-threads 1 > "$OUT/gpu_test.txt" 2>&1; echo "rc=$?"; grep -E "^test |test result" "$OUT/gpu_test.txt"
    if [ -x ./gpu_fault ]; then
      stamp "a real illegal address: every later proof on the device fails as DeviceLost"
      timeout $(lim 60) ./gpu_fault > "$OUT/gpu_fault.txt" 2>&1; echo "rc=$?"; grep -E "^test |test result" "$OUT/gpu_fault.txt"
    fi
    ;;
  pasta)
    stamp "Pallas/Vesta MSMs and Pasta NTTs against pasta_curves (quick)"
    timeout $(lim 120) ./gpu_check --pasta-only --quick > "$OUT/gpu_pasta.txt" 2>&1; echo "rc=$?"; grep -c PASS "$OUT/gpu_pasta.txt"; grep -E "FAIL|checks," "$OUT/gpu_pasta.txt" | head -8
    ;;
  pasta-bench)
    stamp "Pasta NTTs and Pallas MSMs beside halo2_proofs on $(nproc) cores"
    timeout $(lim 400) ./gpu_bench pasta-ntt pallas > "$OUT/pasta_bench.txt" 2>&1; echo "rc=$?"; grep -E "^\|" "$OUT/pasta_bench.txt"
    ;;
  abc)
    stamp "a/b/c on the GPU = on the CPU (random and Filecoin-like compiled circuits)"
    timeout $(lim 180) ./gpu_check --abc-only > "$OUT/gpu_abc.txt" 2>&1; echo "rc=$?"; tail -6 "$OUT/gpu_abc.txt"
    ;;
  ops)
    stamp "the operator's first minutes: version, demo on the GPU and with no GPU, serve + client"
    { ./kiln --version; timeout $(lim 120) ./kiln demo; echo "demo rc=$?"; CUDA_VISIBLE_DEVICES= timeout $(lim 120) ./kiln demo; echo "cpu demo rc=$?"; } > "$OUT/ops.txt" 2>&1
    grep -iE "backend|rc=|kiln [0-9]|CUDA|verified" "$OUT/ops.txt" | head -20
    sock=/tmp/kiln-ops.sock; ./kiln serve --listen "unix:$sock" > "$OUT/serve.log" 2>&1 & sp=$!; sleep 3
    { timeout $(lim 120) ./kiln prove --addr "unix:$sock" --kind synthetic; echo "prove rc=$?"; ./kiln status --addr "unix:$sock"; ./kiln metrics --addr "unix:$sock" | grep -E "^kiln_gpu_|^kiln_build_info"; } > "$OUT/client.txt" 2>&1
    kill -TERM $sp; wait $sp; echo "serve rc=$?"; grep -E "rc=|kiln_gpu_|build_info" "$OUT/client.txt" | head -20
    ;;
  small)
    stamp "2 KiB, the four kinds, test setups on the GPU"
    timeout $(lim 300) ./bench-filecoin --inputs in2k --test-setup /tmp/ts2k --warmup 1 --timed 3 --out "$OUT/b2k" > "$OUT/b2k.txt" 2> "$OUT/b2k.log"
    echo "rc=$?"; grep -E "^\| (porep|snap|window|winning)" "$OUT/b2k.txt" | tail -4
    ;;
  big)
    stamp "32 GiB WinningPoSt and PoRep C2"
    KILN_LOG=kiln_pipeline=info,kiln_filecoin=info,kiln_groth16=debug,kiln_synth=info timeout $(lim 560) ./bench-filecoin --inputs in32 --kinds ${BIG_KINDS:-winning,porep} \
      --test-setup /tmp/ts32 --warmup 0 --timed 1 --memory-budget ${MEMBUDGET:-100GiB} --gpu-workers ${GPU_WORKERS:-2} --out "$OUT/b32" > "$OUT/b32.txt" 2> "$OUT/b32.log" &
    bench=$!
    # Every thread's name, state and kernel wait channel shortly before the
    # step's limit: what each waits on if the run has stalled.
    ( sleep $(( $(lim 560) - 25 )); for t in /proc/$(pgrep -x bench-filecoin | head -1)/task/*; do echo "$(cat $t/comm) $(awk '{print $3}' $t/stat) $(cat $t/wchan)"; done > "$OUT/threads.txt" 2>&1 ) &
    dump=$!
    wait $bench; rc=$?; kill $dump 2>/dev/null
    echo "rc=$rc"; tail -12 "$OUT/b32.txt"; grep -E "parameters made|circuit compiled|segmented recording|refus|test setup points" "$OUT/b32.log" | cut -c1-400 | tail -8
    ;;
  synth)
    stamp "32 GiB synthesis on the host alone: ${SYNTH_KINDS:-porep}"
    KILN_LOG=kiln_synth=info,kiln_filecoin=info timeout $(lim ${SYNTH_LIMIT:-580}) ./bench-filecoin --inputs in32 --kinds "${SYNTH_KINDS:-porep}" \
      --synth-only 1 --synth-at-once 2 --no-one-core --out "$OUT/so32" > "$OUT/so32.txt" 2> "$OUT/so32.log"
    echo "rc=$?"; cat "$OUT/so32.txt"; grep -E "segmented recording|circuit compiled|refus|rejected" "$OUT/so32.log" | cut -c1-400 | tail -6
    ;;
  steady)
    stamp "32 GiB PoRep C2, ${STEADY:-3} jobs at once"
    KILN_LOG=kiln_pipeline=info,kiln_groth16=info timeout $(lim 580) ./bench-filecoin --inputs in32 --kinds porep --test-setup /tmp/ts32 --warmup 0 --timed 1 \
      --steady "${STEADY:-3}" --memory-budget ${MEMBUDGET:-100GiB} --out "$OUT/s32" > "$OUT/s32.txt" 2> "$OUT/s32.log"
    echo "rc=$?"; tail -8 "$OUT/s32.txt"
    ;;
  rest)
    stamp "32 GiB ${REST_KINDS:-window,snap}"
    KILN_LOG=kiln_pipeline=info timeout $(lim 580) ./bench-filecoin --inputs in32 --kinds ${REST_KINDS:-window,snap} --test-setup /tmp/ts32 --warmup ${REST_WARMUP:-0} --timed 1 \
      --memory-budget ${MEMBUDGET:-100GiB} --out "$OUT/r32" > "$OUT/r32.txt" 2> "$OUT/r32.log"
    echo "rc=$?"; tail -8 "$OUT/r32.txt"
    ;;
  latency)
    stamp "deadline latency under load, 2 KiB"
    FIL_PROOFS_PARAMETER_CACHE=/tmp/ts2k KILN_TEST_SETUP_DIR=/tmp/ts2k timeout $(lim 400) ./bench-latency --inputs in2k --samples 20 \
      --out "$OUT/lat2k" > "$OUT/lat2k.txt" 2> "$OUT/lat2k.log"
    echo "rc=$?"; tail -12 "$OUT/lat2k.txt"
    ;;
  latency32)
    stamp "32 GiB WinningPoSt latency, unloaded and under a full 32 GiB PoRep load"
    FIL_PROOFS_PARAMETER_CACHE=/tmp/ts32 KILN_TEST_SETUP_DIR=/tmp/ts32 KILN_LOG=kiln_pipeline=info,kiln_groth16=info timeout $(lim 580) ./bench-latency --inputs in32 \
      --critical winning --bulk porep --modes isolated --samples ${LAT_SAMPLES:-10} --bulk-in-flight ${LAT_BULK:-3} --settle-s 10 --bulk-window-s 30 \
      --engine memory_budget_bytes=$(( ${MEMBUDGET_GIB:-90} << 30 )) --out "$OUT/lat32" > "$OUT/lat32.txt" 2> "$OUT/lat32.log"
    echo "rc=$?"; tail -12 "$OUT/lat32.txt"
    ;;
  ptx)
    stamp "the kernels from PTX (CUDA_FORCE_PTX_JIT=1): $(./kiln --version)"
    CUDA_FORCE_PTX_JIT=1 timeout $(lim 240) ./gpu_check --quick > "$OUT/ptx_check.txt" 2>&1; echo "gpu_check rc=$?"; tail -3 "$OUT/ptx_check.txt"
    CUDA_FORCE_PTX_JIT=1 timeout $(lim 240) ./gpu_test --test-threads 1 > "$OUT/ptx_test.txt" 2>&1; echo "gpu_test rc=$?"; grep -E "^test |test result" "$OUT/ptx_test.txt" | tail -12
    ;;
  faults)
    stamp "KILN_FAULTS on the GPU backend"
    sock=/tmp/kiln-faults.sock; rm -f $sock
    export KILN_ENGINE_PROVER_WATCHDOG_SECS=5 KILN_ENGINE_PROVER_WATCHDOG_FACTOR=3
    # errors and wrong results, retried; quarantine only for sticky faults/hangs
    KILN_FAULTS="start_err=0.1,finish_err=0.1,wrong=0.1,seed=11" KILN_ENGINE_PARTITION_RETRIES=6 KILN_ENGINE_QUARANTINE_AFTER_FAULTS=0 \
      ./kiln serve --listen "unix:$sock" --synthetic-params-dir /tmp/kiln-syn > "$OUT/faults-serve.log" 2>&1 & sp=$!
    sleep 4
    jobs=/tmp/kiln-faults-jobs; rm -rf $jobs; mkdir -p $jobs
    clients=()
    for w in 0 1 2 3; do ( for i in $(seq $w 4 23); do
        RUST_BACKTRACE=0 timeout $(lim 200) ./kiln prove --addr "unix:$sock" --kind synthetic --log-size 16 --partitions 2 > "$jobs/$i.txt" 2>&1; echo "job $i rc=$?" >> "$jobs/$i.txt"
      done ) & clients+=($!); done
    wait "${clients[@]}"
    sleep 1
    for i in $(seq 0 23); do echo "== job $i"; cut -c1-300 "$jobs/$i.txt"; done > "$OUT/faults-jobs.txt"
    echo "completed: $(grep -c ^COMPLETED "$OUT/faults-jobs.txt") failed: $(grep -c -E '^Error|FAILED' "$OUT/faults-jobs.txt")"
    ./kiln metrics --addr "unix:$sock" > "$OUT/faults-metrics.txt" 2>&1
    grep -E "^kiln_backend_faults_total|^kiln_backend_quarantined|^kiln_provers_usable|^kiln_jobs_total|^kiln_partition_retries|verif" "$OUT/faults-metrics.txt" | head -20
    grep -E "FAULTS INJECTED" "$OUT/faults-serve.log" | head -2 | cut -c1-300
    kill -TERM $sp; wait $sp; echo "serve rc=$?"
    # a hang: the watchdog cuts it short, quarantines the only GPU, the daemon exits non-zero
    for fault in hang=1 sticky_after=2; do
      rm -f $sock; name=${fault%%=*}
      KILN_FAULTS="$fault,seed=3" ./kiln serve --listen "unix:$sock" --synthetic-params-dir /tmp/kiln-syn > "$OUT/faults-serve-$name.log" 2>&1 & sp=$!
      sleep 4; t1=$(date +%s)
      for i in 1 2 3 4; do RUST_BACKTRACE=0 timeout $(lim 120) ./kiln prove --addr "unix:$sock" --kind synthetic --log-size 16 2>&1 | head -c 400; echo " (rc=${PIPESTATUS[0]})"; done > "$OUT/faults-$name.txt"
      timeout $(lim 60) tail --pid=$sp -f /dev/null; wait $sp; echo "$fault: serve rc=$? after $(( $(date +%s) - t1 )) s"; cut -c1-160 "$OUT/faults-$name.txt"
      grep -iE "quarantin|no prover|watchdog" "$OUT/faults-serve-$name.log" | head -3 | cut -c1-240
    done
    unset KILN_ENGINE_PROVER_WATCHDOG_SECS KILN_ENGINE_PROVER_WATCHDOG_FACTOR
    ;;
  *) echo "unknown step $step" ;;
  esac
done
echo "VRAM peak: $(awk -F', ' '{print $2}' "$OUT/vram.txt" | sort -n | tail -1)"
stamp done
