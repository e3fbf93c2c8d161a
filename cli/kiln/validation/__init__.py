"""The judging floor: what a cluster's results are and how they are judged.

`verdicts` (pass / warn / fail with a one-line reason, and the exit code of a
verdict), `profiles` (the reference numbers shipped with Kiln or an operator's own),
the parsers of results (`nccl_tests`, `fio`, `burn_in_samples`, `collect`) and the
records they read (`results`), the judges (`assess`, `nccl_judge`, `burn_in_judge`),
`pairs` (the search for a slow node) and `drain` (what to do in Slurm). It imports
nothing above Slurm's files, hostlists and errors (tests/unit/test_architecture.py):
the campaigns (kiln.campaigns), the reports and the roles' filters all judge by it.
"""
