"""Judging a cluster: benchmark output parsers, reference profiles and verdicts.

`nccl_tests` reads nccl-tests output (text and -J JSON), `fio` reads fio's JSON,
`profiles` loads the reference numbers shipped with Kiln (or an operator's own),
`verdicts` turns a measured value into pass / warn / fail with a one-line reason, and
`nccl_judge` applies both to nccl-tests runs (`kiln judge nccl-tests`).
"""
