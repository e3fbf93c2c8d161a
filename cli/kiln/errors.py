"""One family of user-facing errors, each carrying its documented exit code.

The CLI catches KilnError once (kiln.cli.main) and prints its message on one line;
anything else is a bug and shows a traceback only with --debug.
"""

from enum import IntEnum


class ExitCode(IntEnum):
    """Exit codes documented in docs/cli.md."""

    OK = 0
    FAILED = 1  # an operation failed outside any host (a playbook error, a podman error)
    BAD_INPUT = 2  # nothing ran
    NOT_CHECKED = 3  # a judged run: a node was not checked, and none failed
    HOSTS_FAILED = 4  # one or more hosts failed or were unreachable
    VALIDATION_FAILED = 5  # validation ran and a node (or a judged result) failed
    DRIFT = 6  # `kiln drift` found a node that differs from what is declared
    LOCKED = 7  # another kiln run holds this inventory; nothing ran
    INTERRUPTED = 130


class KilnError(Exception):
    """An error the operator can act on: a one-line message and an exit code."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, message: str, exit_code: ExitCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code


class InputError(KilnError):
    """Bad input from the operator: an inventory, an option, a file."""


class PrerequisiteError(KilnError):
    """The host lacks something Kiln needs (podman, debootstrap, ...)."""
