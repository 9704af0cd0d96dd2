#!/usr/bin/env bash
# Issue 38's paper-size runs on a GPU machine, in slices that fit one device call: each call runs for at most
# RUN_S seconds (default 420) after the install, and the next call resumes from the checkpoints the last left.
#   airquality   Gadd et al.: case_studies/gadd2021_sgplvm/run.py --part airquality --paper (PM 4 x 5000, Q = 1000);
#                its PM chains are checkpointed every 100 iterations in case_studies/gadd2021_sgplvm/results/cache
#   fig3         Tegner et al. Fig. 3: case_studies/tegner2018_sequential/run.py full (6000-iteration chains at every
#                step of both schemes); each finished step is checkpointed in case_studies/tegner2018_sequential/
#                results/cache
# Before the first call, on this machine: bash benchmarks/gpu/prepare.sh, and the parts that need Stan (NUTS runs
# on the CPU, not on the device image), e.g. `run.py --part airquality --paper --pm skip`, which caches VEM and NUTS.
# Each call (the run tool), carrying the caches both ways:
#   run(command="bash benchmarks/gpu/paper_runs.sh airquality", timeout_s=560,
#       carry=[".gpu", "case_studies/gadd2021_sgplvm/results/cache"])
# then copy $OUT/<study>/ (results and cache) back into the working tree. $OUT also holds paper_runs.log, env.txt
# and the run's output, <part>.log.
# Smoke test on a CPU: PYTHON=.venv/bin/python RUN_S=60 DEVICE=cpu bash benchmarks/gpu/paper_runs.sh airquality
set -uo pipefail
PART=${1:?"which run: airquality or fig3"}
LOG_NAME=paper_runs.log
source "$(dirname "$0")/setup.sh"
case "$PART" in
  airquality) STUDY=case_studies/gadd2021_sgplvm; COMMAND=(--part airquality --paper) ;;
  fig3) STUDY=case_studies/tegner2018_sequential; COMMAND=(full) ;;
  *) log "unknown part $PART (airquality or fig3)"; exit 2 ;;
esac
log "$PART: $STUDY/run.py ${COMMAND[*]} --device ${DEVICE:-gpu}, at most ${RUN_S:-420} s"
timeout "${RUN_S:-420}" "$PYTHON" "$STUDY/run.py" "${COMMAND[@]}" --device "${DEVICE:-gpu}" > "$OUT/$PART.log" 2>&1
status=$?
[ "$status" = 124 ] && log "$PART: stopped at the time limit; the next call resumes from the checkpoint" \
  || log "$PART: exit $status"
mkdir -p "$OUT/$STUDY"
cp -r "$STUDY/results/." "$OUT/$STUDY/"
log "copied $STUDY/results to \$OUT: $(find "$OUT/$STUDY" -type f | wc -l) files"
