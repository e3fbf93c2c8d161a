#!/usr/bin/env bash
# `make test`'s stages one after another, each timed; the table of times is printed at
# the end, also when a stage fails: CI has an hour, and this says where it went.
# scripts/molecule.sh adds a row per scenario (KILN_TIMINGS). A failed test stage
# (lint, unit, molecule, e2e) does not stop the others: one CI run reports every
# failure. A failed set-up stage (prereqs, venv) stops the run.
#
# Lanes joined by "+" (e2e+molecule) run side by side: the first one's output goes to
# the terminal as it comes, each other one's to build/logs/STAGE.log, printed whole once
# the group is done. Molecule keeps both cores busy while the lab's tests wait on Slurm,
# health checks and jobs (docs/performance.md, "Molecule beside the lab"). A lane may be
# stages joined by "," (molecule,e2e-newuser), run one after another, each one timed:
# so the lanes end close together.
#
# Every stage's output is also kept in build/logs/STAGE.log (KILN_STAGE_LOGS names
# another directory: the script's own tests keep theirs out of the checkout). The last
# lines printed name what failed (pytest's FAILED/ERROR lines, Molecule's failed
# scenarios): CI shows only the end of a run's output, and a failure named there needs
# no rerun.
set -uo pipefail
cd "$(dirname "$0")/.."
logs="${KILN_STAGE_LOGS:-build/logs}"
mkdir -p "$logs"
KILN_TIMINGS="$(mktemp)" KILN_FAILED="$(mktemp)"
export KILN_TIMINGS
report() {
  echo "== time per stage"
  awk '{ printf "%-28s %5dm%02ds\n", $1, $2 / 60, $2 % 60 }' "$KILN_TIMINGS"
  local stage log
  while read -r stage log; do
    echo "== stage $stage failed; from $log:"
    grep -E '^(FAILED|ERROR) |^== molecule scenarios failed|^== molecule scenario .* took over' "$log" |
      cut -c1-240 | tail -n 12
  done <"$KILN_FAILED"
  rm -f "$KILN_TIMINGS" "$KILN_FAILED"
}
trap report EXIT

# Runs one stage, times it and records a failure. Its output goes to build/logs/STAGE.log,
# and to the terminal too unless $2 (quiet) is given.
run_stage() {
  local stage=$1 quiet=${2:-} log=$logs/$1.log start=$SECONDS rc=0
  if [ -n "$quiet" ]; then
    make --no-print-directory "$stage" >"$log" 2>&1 || rc=$?
  else
    make --no-print-directory "$stage" 2>&1 | tee "$log" || rc=$?
  fi
  echo "$stage $((SECONDS - start))" >>"$KILN_TIMINGS"
  if [ "$rc" -ne 0 ]; then
    echo "== stage $stage failed (exit $rc)"
    echo "$stage $log" >>"$KILN_FAILED"
  fi
  return "$rc"
}

# Runs a lane's stages one after another, each whether or not the one before passed. Its
# status: the first failure's.
run_lane() {
  local lane=$1 quiet=${2:-} stage rc=0 failed_here=0
  for stage in ${lane//,/ }; do
    rc=0
    run_stage "$stage" $quiet || rc=$?
    [ "$failed_here" -ne 0 ] || failed_here=$rc
  done
  return "$failed_here"
}

for group in "$@"; do
  IFS=+ read -ra stages <<<"$group"
  if [ "${#stages[@]}" -eq 1 ]; then
    rc=0
    run_lane "$group" || rc=$?
    if [ "$rc" -ne 0 ]; then
      case "$group" in prereqs | venv) exit "$rc" ;; esac
      failed=${failed:-$rc}
    fi
    continue
  fi
  start=$SECONDS
  pids=()
  for lane in "${stages[@]:1}"; do
    for stage in ${lane//,/ }; do
      echo "== stage $stage runs beside ${stages[0]}; its output: $logs/$stage.log"
    done
    run_lane "$lane" quiet &
    pids+=($!)
  done
  rc=0
  run_lane "${stages[0]}" || rc=$?
  [ "$rc" -eq 0 ] || failed=${failed:-$rc}
  for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    for stage in ${stages[$((i + 1))]//,/ }; do
      echo "== stage $stage's output ($logs/$stage.log)"
      cat "$logs/$stage.log" 2>/dev/null
    done
    [ "$rc" -eq 0 ] || failed=${failed:-$rc}
  done
  echo "$group $((SECONDS - start))" >>"$KILN_TIMINGS"
done
exit "${failed:-0}"
