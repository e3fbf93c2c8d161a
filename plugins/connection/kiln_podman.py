"""Podman connection with pipelining: kiln.cluster.kiln_podman.

containers.podman's connection runs `podman exec` without `--interactive`, so a module
cannot be piped to the node's Python and every task costs a `podman mount`, a temporary
directory, a copy and two or three `podman exec` calls. This one passes stdin when Ansible
pipelines a module (one `podman exec` per task) and mounts the container only when a
file is copied. `kiln image build` reaches its build container through it, and Molecule
its scenarios' containers (molecule/config.yml).
"""

from ansible.plugins.connection import ConnectionBase
from ansible_collections.containers.podman.plugins.connection import podman

DOCUMENTATION = """
name: kiln_podman
short_description: Run tasks in podman containers, modules piped to the node's Python
description:
  - containers.podman's podman connection with pipelining (see this file's docstring).
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: ansible_host
      - name: inventory_hostname
      - name: ansible_podman_host
  remote_user:
    description: The user tasks run as in the container.
    vars:
      - name: ansible_user
  podman_extra_args:
    description: Arguments given to every podman command.
    default: ""
    vars:
      - name: ansible_podman_extra_args
  podman_executable:
    description: The podman program.
    default: podman
    vars:
      - name: ansible_podman_executable
  pipelining:
    description: Pipe modules to the node's Python, one `podman exec` per task (the
      reason this connection exists, so on unless turned off).
    type: boolean
    default: true
    env:
      - name: ANSIBLE_PIPELINING
    vars:
      - name: ansible_pipelining
"""


class Connection(podman.Connection):
    transport = "kiln.cluster.kiln_podman"
    has_pipelining = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._mounted = False

    def _connect(self):
        # No mount here: most tasks never copy a file.
        ConnectionBase._connect(self)
        self._connected = True

    def _mount(self):
        if not self._mounted:
            super()._connect()
            self._mounted = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if in_data is None:
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        self._connect()
        ConnectionBase.exec_command(self, cmd, in_data=in_data, sudoable=sudoable)
        args = ["exec", "--interactive"]
        if self.user:
            args += ["--user", self.user]
        return self._podman(args, podman.shlex.split(cmd), in_data)

    def put_file(self, in_path, out_path):
        self._mount()
        super().put_file(in_path, out_path)

    def fetch_file(self, in_path, out_path):
        self._mount()
        super().fetch_file(in_path, out_path)
