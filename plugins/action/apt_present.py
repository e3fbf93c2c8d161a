"""ansible.builtin.apt, which first asks dpkg (and for state=latest apt-cache policy) what
is left to do: where nothing is (the usual case on a re-run) it reports ok without running
apt, whose cache takes a second of CPU to open on every node; otherwise it runs apt with
the same arguments (for state=absent, only the packages still there). For state=present
and absent the lists' age does not matter: a node with every package installed is not
sent to its mirror (on a re-run a day later, an `apt-get update` per node and task that
asked for one); an install runs on lists no older than the task's cache_valid_time, an
hour where it gives none. The decisions are kiln.packages."""

import shlex
from collections.abc import Callable

from ansible.plugins.action import ActionBase
from ansible_collections.kiln.cluster.plugins.plugin_utils import kiln_package  # noqa: F401

from kiln import packages

_NAMES = ("name", "pkg", "package")
# Arguments that ask apt for more than installing, removing or upgrading the packages
# named. update_cache is not one: an install asks for it anyway (present, absent), or
# cache_valid_time says whether apt would update (latest).
_APT_ONLY = {"upgrade", "deb", "autoremove", "autoclean", "clean"}
# How old apt's lists may be for an install, where the task names no cache_valid_time.
_LISTS_VALID_S = 3600


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        names = next((args[k] for k in _NAMES if args.get(k)), [])
        names = [names] if isinstance(names, str) else list(names)
        state = args.get("state", "present")
        simple = state == "present" and packages.understood(names)
        simple = simple or (state in ("absent", "latest") and packages.unpinned(names))
        recent = None  # whether apt would skip the update asked for (unknown: not asked)
        if simple and not _APT_ONLY & {k for k, v in args.items() if v}:
            # present and absent: dpkg answers whatever the lists' age, but for an
            # update asked for always (update_cache without cache_valid_time).
            forced = args.get("update_cache") and not _valid_time(args)
            recent = not forced if state != "latest" else self._cache_recent(args)
        if recent:
            if state == "present":
                todo = self._dpkg(names, lambda out: packages.missing(names, out))
                done = "installed: "
            elif state == "absent":
                purge = bool(args.get("purge"))
                todo = self._dpkg(names, lambda out: packages.present(names, out, purge))
                done = "not installed (purged): " if purge else "not installed: "
            else:
                policy = self._command(packages.policy_argv(names), (0,))
                todo = names
                if policy is not None:
                    todo = self._dpkg(names, lambda out: packages.outdated(names, out, policy))
                done = "at apt's candidate version: "
            if not todo:
                result.update(changed=False, msg=done + ", ".join(names))
                return result
            if state == "absent":  # apt is asked about those still there only
                args = {k: v for k, v in args.items() if k not in _NAMES} | {"name": todo}
            if state == "present":  # an install on lists no older than the hour
                valid = _valid_time(args) or _LISTS_VALID_S
                args = args | {"update_cache": True, "cache_valid_time": valid}
        # ansible.builtin.apt reads a recent lists directory as a recent update, also one
        # emptied when an image was built: it would skip the update and find no package.
        if args.get("cache_valid_time") and recent is not False and self._lists_empty():
            args = {k: v for k, v in args.items() if k != "cache_valid_time"}
            args["update_cache"] = True
        result.update(
            self._execute_module(
                module_name="ansible.builtin.apt", module_args=args, task_vars=task_vars
            )
        )
        return result

    def _command(self, argv: list[str], ok: tuple[int, ...]) -> str | None:
        """The command's output on the node; None where it exited otherwise. A read-only
        query, so it runs in check mode too (a module would not)."""
        done = self._low_level_execute_command(shlex.join(argv))
        return done["stdout"] if done["rc"] in ok else None

    def _dpkg(self, names: list[str], left: Callable[[str], list[str]]) -> list[str]:
        """What left finds still to do from dpkg-query's answer; all of names where there
        is none. dpkg-query exits 1 when a name is unknown to it (that package is not
        installed)."""
        out = self._command(packages.query_argv(names), (0, 1))
        return names if out is None else left(out)

    def _lists_empty(self) -> bool:
        return not (self._command(packages.lists_index_argv(), (0,)) or "").strip()

    def _cache_recent(self, args) -> bool:
        """Whether the task asks for no cache update, or for one that ansible.builtin.apt
        would skip: apt's lists are no older than cache_valid_time (which alone asks for
        an update too)."""
        valid = _valid_time(args)
        if not (args.get("update_cache") or args.get("cache_valid_time")):
            return True
        try:
            return valid > 0 and int(self._command(packages.cache_age_argv(), (0,)) or "") <= valid
        except ValueError:
            return False


def _valid_time(args) -> int:
    """The task's cache_valid_time in seconds; 0 where it gives none or no number."""
    try:
        return max(int(args.get("cache_valid_time") or 0), 0)
    except (TypeError, ValueError):
        return 0
