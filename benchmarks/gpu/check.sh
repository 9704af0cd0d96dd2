#!/usr/bin/env bash
# Issue 38's device check, in about 8 minutes of one GPU machine, install included:
#   1. install: gpdsl[cuda,test] from the package index when it is reachable; on a machine without network (the
#      H200 lent here), the wheels benchmarks/gpu/prepare.sh put in .gpu/wheels, over the image's JAX and CUDA plugin
#   2. the engines' default-tier tests on the GPU: every method once (tests/test_method_flags.py), the device
#      option, the linear algebra and the no-host-callback check of every model's segment
#   3. benchmarks/gpu/bench.py on the GPU and on this machine's CPU (--device cpu, same seeds and sizes), at once
#      on separate cores (two for the GPU's process, the rest for the CPU's) to fit the time
#   4. the markdown table of both, with the devices named: $OUT/gpu.md (copy it to benchmarks/results/gpu.md)
# $OUT then holds 8 files: check.log, env.txt, tests.log, tests.xml, bench.log, gpu.jsonl, cpu.jsonl, gpu.md.
# Each phase has a time limit (seconds; override by the variables): INSTALL_S 90, TEST_S 150, BENCH_S 240; a
# benchmark stopped by its limit leaves the rows finished before it (bench.py runs the issue's targets first).
#
# On the device (here: the run tool, after `bash benchmarks/gpu/prepare.sh` on this machine):
#   run(command="bash benchmarks/gpu/check.sh", carry=[".gpu"], timeout_s=560)
# Smoke test on a CPU (small sizes, the device tests only, the GPU rows skipped when JAX sees no GPU):
#   PYTHON=.venv/bin/python bash benchmarks/gpu/check.sh --quick
set -uo pipefail
QUICK=""
[ "${1:-}" = "--quick" ] && QUICK="--quick" && BENCH_S=${BENCH_S:-1500}  # a CPU alone, compilation the most of it
source "$(dirname "$0")/setup.sh"

log "tests"
if [ -n "$QUICK" ]; then
  TESTS=(tests/test_devices.py -m "not slow")
else
  TESTS=(tests/test_method_flags.py tests/test_devices.py tests/test_linalg.py
         tests/inference/test_segment_device_agnostic.py -m "not slow" -n 4)
fi
timeout "${TEST_S:-150}" "$PYTHON" -m pytest -q -p no:cacheprovider "${TESTS[@]}" --junitxml="$OUT/tests.xml" \
  > "$OUT/tests.log" 2>&1
log "tests: exit $? ($(tail -1 "$OUT/tests.log"))"

rm -f "$OUT/gpu.jsonl" "$OUT/cpu.jsonl" "$OUT/bench.log"
bench() {  # bench DEVICE CORES SECONDS: bench.py on DEVICE, pinned to CORES when given
  local pin=()
  [ -n "$2" ] && command -v taskset >/dev/null && pin=(taskset -c "$2")
  timeout "$3" "${pin[@]}" "$PYTHON" benchmarks/gpu/bench.py --device "$1" $QUICK --out "$OUT/$1.jsonl" \
    > "$OUT/bench-$1.log" 2>&1
  log "benchmarks on the $1: exit $? ($( (grep -c '"status": "ok"' "$OUT/$1.jsonl" 2>/dev/null) || true) ok)"
}
CORES=$(nproc)
if [ "$GPU" = "yes" ] && [ "$CORES" -ge 8 ]; then
  # Both at once, on cores of their own: the GPU's process (dispatch and compilation) on two, the CPU's on the
  # rest, with one XLA host device per core it has.
  log "benchmarks on the GPU (cores 0-1) and the CPU (cores 2-$((CORES - 1))) at once"
  bench gpu 0-1 "${BENCH_S:-240}" &
  XLA_FLAGS="--xla_force_host_platform_device_count=$((CORES - 2))" bench cpu "2-$((CORES - 1))" "${BENCH_S:-240}" &
  wait
elif [ "$GPU" = "yes" ]; then
  bench gpu "" "${BENCH_S:-240}"
  bench cpu "" "${BENCH_S:-240}"
else
  log "no GPU: the GPU rows are skipped"
  bench cpu "" "${BENCH_S:-240}"
fi
cat "$OUT"/bench-*.log > "$OUT/bench.log" 2>/dev/null; rm -f "$OUT"/bench-*.log
"$PYTHON" benchmarks/gpu/bench.py --table "$OUT/cpu.jsonl" "$OUT/gpu.jsonl" > "$OUT/gpu.md"
cat "$OUT/gpu.md"
log "done: $OUT/gpu.md"
