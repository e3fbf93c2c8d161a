#!/usr/bin/env bash
# `make test`'s stages one after another, each timed; the table of times is printed at
# the end, also when a stage fails: CI has an hour, and this says where it went.
# scripts/molecule.sh adds a row per scenario (KILN_TIMINGS). A failed test stage
# (lint, unit, molecule, e2e) does not stop the others: one CI run reports every
# failure. A failed set-up stage (prereqs, venv) stops the run.
#
# Stages joined by "+" run side by side: the first in the foreground, the rest one after
# another behind it, their output held and printed when the first ends. `molecule+lint+unit`:
# Molecule waits on podman and apt as much as on the two cores, and lint and unit fill
# those waits (docs/performance.md has the times).
set -uo pipefail
cd "$(dirname "$0")/.."
KILN_TIMINGS="$(mktemp)"
export KILN_TIMINGS
report() {
  echo "== time per stage"
  awk '{ printf "%-28s %5dm%02ds\n", $1, $2 / 60, $2 % 60 }' "$KILN_TIMINGS"
  rm -f "$KILN_TIMINGS"
}
trap report EXIT

# Runs one stage, adds its row, and says its exit status in the file $2 when it fails.
stage() {
  local start=$SECONDS rc=0
  make --no-print-directory "$1" || rc=$?
  echo "$1 $((SECONDS - start))" >>"$KILN_TIMINGS"
  if [ "$rc" -ne 0 ]; then
    echo "== stage $1 failed (exit $rc)"
    echo "$1 $rc" >>"$2"
  fi
}

failures="$(mktemp)"
for spec in "$@"; do
  IFS=+ read -r -a together <<<"$spec"
  held=""
  if [ "${#together[@]}" -gt 1 ]; then
    held="$(mktemp)"
    (for name in "${together[@]:1}"; do stage "$name" "$failures"; done) >"$held" 2>&1 &
    behind=$!
  fi
  stage "${together[0]}" "$failures"
  if [ -n "$held" ]; then
    wait "$behind"
    echo "== output of ${together[*]:1} (run beside ${together[0]})"
    cat "$held"
    rm -f "$held"
  fi
  if grep -qE '^(prereqs|venv) ' "$failures"; then
    exit "$(awk '{ print $2; exit }' "$failures")"
  fi
done
first_failure="$(awk '{ print $2; exit }' "$failures")"
rm -f "$failures"
exit "${first_failure:-0}"
