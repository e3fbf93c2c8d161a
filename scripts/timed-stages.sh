#!/usr/bin/env bash
# `make test`'s stages one after another, each timed; the table of times is printed at
# the end, also when a stage fails: CI has an hour, and this says where it went.
# scripts/molecule.sh adds a row per scenario (KILN_TIMINGS). A failed test stage
# (lint, unit, molecule, e2e) does not stop the others: one CI run reports every
# failure. A failed set-up stage (prereqs, venv) stops the run.
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
for stage in "$@"; do
  start=$SECONDS
  rc=0
  make --no-print-directory "$stage" || rc=$?
  echo "$stage $((SECONDS - start))" >>"$KILN_TIMINGS"
  if [ "$rc" -ne 0 ]; then
    echo "== stage $stage failed (exit $rc)"
    case "$stage" in prereqs | venv) exit "$rc" ;; esac
    failed=${failed:-$rc}
  fi
done
exit "${failed:-0}"
