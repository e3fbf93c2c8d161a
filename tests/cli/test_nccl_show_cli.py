"""`kiln nccl show` through the `kiln` process, against this machine."""

import json

from kiln.errors import ExitCode
from tests.conftest import run_kiln


def test_a_node_that_could_not_be_read_exits_3(local_inventory):
    """Not read is not checked (exit 3), not a failed host (4): docs/cli.md#exit-codes."""
    ghost = {
        "ansible_host": "127.0.0.1",
        "ansible_port": 1,
        "ansible_user": "root",
        "ansible_ssh_common_args": "-o ConnectTimeout=3",
    }
    shown = run_kiln("nccl", "show", "-i", local_inventory({"ghost01": ghost}), "--json")
    assert shown.returncode == ExitCode.NOT_CHECKED, shown.stderr
    found = json.loads(shown.stdout)
    assert (found["nodes"], found["differences"]) == (
        {
            "ghost01": {
                "preset": "",
                "settings": [],
                "note": "",
                "error": "Read /etc/nccl.conf: Failed to connect to the host via ssh: ssh: "
                "connect to host 127.0.0.1 port 1: Connection refused",
            }
        },
        [],
    )
