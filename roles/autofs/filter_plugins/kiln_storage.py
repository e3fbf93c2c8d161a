"""Filters that hand storage declarations to kiln.storage: the role and `kiln inventory
check` judge a mount the same way."""

import sys
from pathlib import Path

try:
    import kiln  # noqa: F401
except ImportError:  # plain ansible-playbook from a checkout without Kiln installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "cli"))

from ansible.errors import AnsibleFilterError

from kiln import storage


def kiln_storage_plan(declared, host_groups, kernel):
    """What this host gets: autofs files, client packages, vendor clients to look for,
    and the list the health check reads."""
    try:
        mounts = storage.for_host(storage.parse(declared), list(host_groups))
    except storage.StorageError as exc:
        raise AnsibleFilterError(f"autofs_mounts: {exc}") from None
    packages = sorted({p for m in mounts for p in storage.CLIENT_PACKAGES[m.kind] or []})
    vendor = [
        {"mount": m.name, "type": m.type, "probe": storage.VENDOR_CLIENTS[m.kind][0],
         "client": storage.VENDOR_CLIENTS[m.kind][1]}
        for m in mounts
        if m.kind in storage.VENDOR_CLIENTS
    ]
    return {
        "files": storage.files(mounts, kernel),
        "packages": ["autofs", *packages] if mounts else [],
        "vendor": vendor,
        "checks": storage.check_list(mounts),
    }


class FilterModule:
    def filters(self):
        return {"kiln_storage_plan": kiln_storage_plan}
