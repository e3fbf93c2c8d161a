"""What a node under test has for the validate suites, looked at once per node by the
validate role (roles/validate/tasks/main.yml) and printed as one JSON object, which the
role registers as one result (kiln.validation.suites.FOUND, read there as `Found`):

    torch       the import's record (rc, stdout: the version, stderr) with the Python
                named by --torch-python; null where not asked
    nccl_tests  whether all_reduce_perf is in --nccl-tests-dir; null where not asked
    toolchain   where nccl-tests is missing: the CUDA toolkit, NCCL and MPI found
                (kiln_node.cuda_toolchain), for the reason a node was not measured
    mpi_check   whether Kiln's MPI check (--mpi-check, the mpi role's) is there

Which of them are asked for follows from the suites (kiln.validation.registry's
`needs`). Run as `python3 -m kiln_node.prerequisites` beside the node library.
"""

import argparse
import json
import os
import shlex
import sys

from kiln_node import commands, cuda_toolchain

# A cold `import torch` on a shared filesystem can take minutes; past this it counts
# as missing (the record says so).
TORCH_TIMEOUT_S = 600


def torch(python: str, timeout: float = TORCH_TIMEOUT_S) -> dict:
    """`python -c 'import torch'`, recorded; `python` may carry arguments, as the
    validate_torch_python setting always could."""
    return commands.record(
        [*shlex.split(python), "-c", "import torch; print(torch.__version__)"], timeout
    )


def look(
    torch_python: str = "",
    nccl_tests_dir: str = "",
    mpi_check: str = "",
    cuda_home: str = "",
    nccl_home: str = "",
) -> dict:
    """What the node has of what was asked (an empty argument: not looked for)."""
    found: dict = {"torch": None, "nccl_tests": None, "toolchain": None, "mpi_check": None}
    if torch_python:
        found["torch"] = torch(torch_python)
    if nccl_tests_dir:
        found["nccl_tests"] = os.path.exists(os.path.join(nccl_tests_dir, "all_reduce_perf"))
        if not found["nccl_tests"]:
            found["toolchain"] = cuda_toolchain.find(cuda_home, nccl_home)
    if mpi_check:
        found["mpi_check"] = os.path.exists(mpi_check)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch-python", default="")
    parser.add_argument("--nccl-tests-dir", default="")
    parser.add_argument("--mpi-check", default="")
    parser.add_argument("--cuda-home", default="")
    parser.add_argument("--nccl-home", default="")
    args = parser.parse_args(argv)
    found = look(
        args.torch_python, args.nccl_tests_dir, args.mpi_check, args.cuda_home, args.nccl_home
    )
    print(json.dumps(found, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
