"""Where things are: the Ansible content, Kiln's state directory, the default inventory.

This is the only module that knows the layout of a checkout versus an installed wheel.
"""

import hashlib
import os
import threading
from pathlib import Path

from kiln import files
from kiln.errors import InputError

_PACKAGE_DIR = Path(__file__).resolve().parent


def content_root() -> Path:
    """The directory holding ansible.cfg, playbooks/ and roles/.

    A built wheel carries them in kiln/ansible/; an editable install or a checkout
    has them at the repository root, two levels above this package.
    """
    packaged = _PACKAGE_DIR / "ansible"
    if (packaged / "playbooks").is_dir():
        return packaged
    checkout = _PACKAGE_DIR.parent.parent
    if (checkout / "playbooks").is_dir():
        return checkout
    raise RuntimeError(f"Kiln's playbooks are missing: looked in {packaged} and {checkout}")


def is_checkout() -> bool:
    return content_root() != _PACKAGE_DIR / "ansible"


def playbooks_dir() -> Path:
    return content_root() / "playbooks"


def roles_dir() -> Path:
    return content_root() / "roles"


# The collection the roles belong to: they name their filters and lookups
# kiln.cluster.NAME, as they must inside the collection built from this same tree
# (galaxy.yml), so the CLI and Molecule reach the plugins as that collection too.
COLLECTION = ("kiln", "cluster")


def collections_dir() -> Path:
    """A collections path holding kiln.cluster: a link to the content root, kept in the
    state directory (a checkout or a wheel's content is not laid out as a collection).
    One per content root: two checkouts or installs sharing a state directory never
    point each other's running playbooks at their own plugins."""
    target = content_root()
    tag = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:12]
    top = state_dir() / "collections" / tag
    link = top.joinpath("ansible_collections", *COLLECTION)
    if not (link.is_symlink() and link.resolve() == target.resolve()):
        link.parent.mkdir(parents=True, exist_ok=True)
        # A new link renamed over the old one: runs starting together never see none.
        # Named per thread too: a sliced run starts its parts from threads of one process.
        fresh = link.with_name(f".{link.name}.{os.getpid()}.{threading.get_ident()}")
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(target, target_is_directory=True)
        fresh.replace(link)
    return top


def ansible_cfg() -> Path:
    return content_root() / "ansible.cfg"


def state_dir() -> Path:
    """Kiln's state: runs, the lab's keys and records. $KILN_STATE_DIR overrides.
    Made 0700 when missing: it holds facts, records and reports from every node."""
    if override := os.environ.get("KILN_STATE_DIR"):
        path = Path(override).expanduser()
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        path = Path(xdg) / "kiln"
    if not path.is_dir():
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def fact_cache() -> Path:
    """Ansible's fact cache for every run (kiln.run.execute) and what reads it
    (kiln.os_support). $KILN_FACT_CACHE overrides the state directory's facts/: control
    machines that provision one cluster's parts (`kiln provision --part`) share one, so
    the controllers' run reads the facts the slices cached on other machines. Made 0700
    when missing: it holds root's facts from every node."""
    override = os.environ.get("KILN_FACT_CACHE")
    if override is None:
        path = state_dir() / "facts"
    elif not override.strip():  # a script's unset variable must not mean "not shared"
        raise InputError("$KILN_FACT_CACHE is empty: name a directory, or unset it")
    else:
        path = Path(override).expanduser().absolute()
    if path.exists() and not path.is_dir():
        named = "$KILN_FACT_CACHE" if override is not None else "the fact cache"
        raise InputError(f"{named} {path}: not a directory")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise files.cannot_write(path, exc) from None
    return path


def runs_dir() -> Path:
    return state_dir() / "runs"


def lab_state_dir(name: str) -> Path:
    return state_dir() / "lab" / name


DEFAULT_LAB = "kiln"


def lab_inventory_dir(name: str = DEFAULT_LAB) -> Path:
    """A lab's inventory: the committed lab settings plus a generated hosts.yml.

    The default lab in a checkout uses inventories/lab/ itself (hosts.yml is
    git-ignored). Other labs, and any lab of an installed wheel (read-only), get a
    copy in the state directory.
    """
    if name == DEFAULT_LAB and is_checkout():
        return content_root() / "inventories" / "lab"
    return lab_state_dir(name) / "inventory"


def packaged_lab_settings() -> Path:
    return content_root() / "inventories" / "lab"


def default_inventory() -> Path:
    if env := os.environ.get("KILN_INVENTORY"):
        return Path(env).expanduser()
    return lab_inventory_dir()
