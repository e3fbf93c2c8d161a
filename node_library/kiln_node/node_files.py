"""Reading a node's own files (sysfs, /proc, /etc), as every node program does: a file
that is missing or cannot be read (a GID slot not in use answers EINVAL) is None, not
an error."""


def read(path: str) -> str | None:
    """The file's text as it is (undecodable bytes replaced), None when unreadable."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None
