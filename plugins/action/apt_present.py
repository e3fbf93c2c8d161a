"""ansible.builtin.apt with state=present, which first asks dpkg: where every package is
installed as asked (the usual case on a re-run) it reports ok without running apt, whose
cache takes a second of CPU to open on every node; otherwise it runs apt with the same
arguments. The decision is kiln.packages."""

import shlex
import sys
from pathlib import Path

from ansible.plugins.action import ActionBase

try:
    from kiln import packages
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "cli"))
    from kiln import packages

# Arguments that ask apt for more than installing what is missing.
_APT_ONLY = {"update_cache", "upgrade", "deb", "autoremove", "autoclean", "clean"}


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = self._task.args
        names = args.get("name") or args.get("pkg") or args.get("package") or []
        names = [names] if isinstance(names, str) else list(names)
        if (
            args.get("state", "present") == "present"
            and not _APT_ONLY & {k for k, v in args.items() if v}
            and packages.understood(names)
        ):
            # A read-only query, so it runs in check mode too (a module would not).
            query = self._low_level_execute_command(shlex.join(packages.query_argv(names)))
            # dpkg-query exits 1 when a name is unknown to it: that package is missing.
            if query["rc"] in (0, 1) and not packages.missing(names, query["stdout"]):
                result.update(changed=False, msg="installed: " + ", ".join(names))
                return result
        result.update(
            self._execute_module(
                module_name="ansible.builtin.apt", module_args=args, task_vars=task_vars
            )
        )
        return result
