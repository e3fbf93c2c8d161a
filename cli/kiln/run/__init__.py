"""Running a playbook: `execute` (ansible-runner, the lock, cancelling), `record` (the
run's directory and kiln.json, kept for `kiln runs`), `events` (what ansible-runner's
events say: per-host counts and failures), `display` (live progress, the summary), and
`ids` (the ids of runs and validation reports)."""
