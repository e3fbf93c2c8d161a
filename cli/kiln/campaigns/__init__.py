"""Campaigns: flows that hold compute nodes in Slurm, run rounds on them, judge what
comes back and act on the verdicts (`campaign`: the flow they share; `validate`:
`kiln validate`; `burn_in`: `kiln burn-in`; `health_active`: the scheduled
active check's runs). They sit above the judging floor,
kiln.validation, which knows nothing of playbooks, reports or commands."""
