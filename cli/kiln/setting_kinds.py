"""What each role setting written into a file or a command line may hold: one table,
variable -> kind (an absolute path, a URL, a Prometheus duration, a count, a port, one
line, an IP address, a name), each kind a rule of kiln.formats.

`kiln inventory check` checks every value against it (kiln.inventory.checks.VALUE_CHECKS
joins it to the checks each role's module makes itself), and so does each role's
pre-flight, on the values Ansible resolved (roles/base/tasks/values.yml, filter
kiln_value_problems), before anything is written. A setting whose check needs more
than a kind (slurm_partitions, autofs_mounts, hosts of the inventory) is its module's
(kiln.roles: INVENTORY_CHECKS); settings that only make sense together (a version and
its sha256) are its settings_problems'.

Each check returns the first problem as one line naming the variable (and, for a list
or a mapping, the item: `base_packages[2]`, `monitoring_versions.prometheus`), or "".
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kiln import formats, redact, schedules
from kiln.roles.monitoring import settings as monitoring

# A check: the first problem of a value, one line naming the variable, or "".
Check = Callable[[str, Any], str]
# A longer value is cut in the message: the message stays one readable line.
_SHOWN = 80


@dataclass(frozen=True)
class Kind:
    check: Check
    # What the value is (a list, a mapping); kiln.inventory.checks leaves another to the
    # argument spec. A number for a text setting is judged as its text (object).
    type: type = object

    def __call__(self, name: str, value: Any) -> str:
        return self.check(name, value)


def shown(value: Any) -> str:
    """Its repr, credentials hidden before it is cut (a cut URL hides nothing)."""
    text = repr(redact.hide(value))
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def scalar(rule: Callable[[Any], str]) -> Kind:
    """One value; `rule` says why it does not fit ("" when it does)."""

    def check(name: str, value: Any) -> str:
        why = rule(value)
        return f"{name} {shown(value)}: {why}" if why else ""

    return Kind(check)


def each(item: Kind) -> Kind:
    """A list, each item of a kind."""

    def check(name: str, value: Any) -> str:
        return next((p for i, v in enumerate(value) if (p := item(f"{name}[{i}]", v))), "")

    return Kind(check, list)


def mapping(key: Callable[[Any], str], value: Kind) -> Kind:
    """A mapping: each key by `key`'s rule, each value of a kind."""

    def check(name: str, found: Any) -> str:
        for k, v in found.items():
            if why := key(k):
                return f"{name}: key {shown(k)} {why}"
            if problem := value(f"{name}.{k}", v):
                return problem
        return ""

    return Kind(check, dict)


def fields(**kinds: Kind) -> Kind:
    """A mapping whose named fields are of a kind (the rest are its argument spec's)."""

    def check(name: str, found: Any) -> str:
        if not isinstance(found, dict):
            return ""  # the argument spec reports it
        return next(
            (p for f, kind in kinds.items() if f in found and (p := kind(f"{name}.{f}", found[f]))),
            "",
        )

    return Kind(check, dict)


def integer(low: int, high: int | None = None, rule: str = "") -> Kind:
    """A whole number from `low` (to `high`). Ansible may hand a templated number over
    as its digits: those count as the number."""
    why = rule or (f"must be {low} or more" if high is None else f"must be {low} to {high}")

    def fits(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, int | str):
            return why
        text = str(value)
        digits = text.removeprefix("-")
        # ASCII digits only ('٣' is a digit to int()), and few: int() refuses 5,000.
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 20:
            return why
        number = int(text)
        return "" if number >= low and (high is None or number <= high) else why

    return scalar(fits)


PATH = scalar(formats.absolute_path)
PATHS = each(PATH)
BASE_URL = scalar(formats.base_url)
DOWNLOAD_URL = scalar(formats.download_url)
APT_URL = scalar(formats.url)
WORD = scalar(formats.word)
NAME = scalar(formats.name)
IP_ADDRESS = scalar(formats.ip_address)
PACKAGES = each(scalar(formats.package))
PROGRAM = scalar(formats.program)
POSITIVE = integer(1)
COUNT = integer(0, rule="must be 0 or more")
PORT = integer(1, 65535, "not a port (1-65535)")
DURATION = scalar(lambda v: "" if monitoring.is_duration(v) else monitoring.DURATION_RULE)
SIZE = scalar(lambda v: "" if monitoring.is_size(v) else monitoring.SIZE_RULE)

# Variable -> its kind. Where each lands is in the comment above its role's lines.
KINDS: dict[str, Kind] = {
    # kiln-mount-check's command line
    "autofs_check_timeout": POSITIVE,
    # apt-get's command line (a name starting with '-' would be an option)
    "base_packages": PACKAGES,
    "base_extra_packages": PACKAGES,
    "enroot_extra_packages": PACKAGES,
    # each download's URL (get_url)
    "enroot_base_url": BASE_URL,
    "hpcx_base_url": BASE_URL,
    "hpcx_url": BASE_URL,
    "nccl_tests_base_url": BASE_URL,
    "pyxis_base_url": BASE_URL,
    # the brick directories and `gluster volume create NAME` (a name is a word there)
    "glusterfs_server_brick_root": PATH,
    "glusterfs_server_volumes": each(fields(name=NAME)),
    # /etc/kiln/health*.json, the active check's unit (TimeoutStartSec) and its srun
    "health_gpus": COUNT,
    "health_nvlinks_per_gpu": COUNT,
    "health_metrics_dir": PATH,
    "repair_bmc_ca_file": PATH,
    "health_active_reservation": NAME,
    "health_active_minutes": POSITIVE,
    "health_active_keep": POSITIVE,
    "health_active_nice": integer(
        -2147483645, 2147483645, "must be a Slurm nice value (-2147483645 to 2147483645)"
    ),
    "health_active_results_dir": PATH,
    "health_active_schedule": Kind(
        lambda _name, value: schedules.one_line_problem(schedules.HEALTH_ACTIVE, str(value))
    ),
    # Prometheus's, Alertmanager's and node_exporter's command lines (/etc/default's
    # ARGS="..."), apt's sources and preferences, the kiln-metrics timer, metrics.json
    "monitoring_prometheus_port": PORT,
    "monitoring_alertmanager_port": PORT,
    "monitoring_node_exporter_port": PORT,
    "monitoring_grafana_port": PORT,
    "monitoring_dcgm_exporter_port": PORT,
    "monitoring_retention_time": DURATION,
    "monitoring_retention_size": SIZE,
    "monitoring_scrape_interval": DURATION,
    "monitoring_listen_address": WORD,
    "monitoring_storage_path": PATH,
    "monitoring_metrics_dir": PATH,
    "monitoring_metrics_interval": POSITIVE,
    "monitoring_gpu_temperature_ceiling": integer(1, 150, "must be 1 to 150 (degrees Celsius)"),
    "monitoring_versions": mapping(formats.package_name, scalar(formats.apt_version)),
    "monitoring_repository_url": APT_URL,
    "monitoring_grafana_repository_url": APT_URL,
    "monitoring_grafana_repository_suite": WORD,
    "monitoring_grafana_repository_key_url": DOWNLOAD_URL,
    "monitoring_grafana_dashboards_dir": PATH,
    # the nccl-tests build's command line and its stamp
    "nccl_tests_cuda_home": PATH,
    "nccl_tests_nccl_home": PATH,
    "nccl_tests_mpi_home": PATH,
    # nodes_config.cfg (one address a line) and the IMEX domain's name in the plan
    "nvidia_driver_imex_address": IP_ADDRESS,
    "nvidia_driver_imex_domain": NAME,
    "nvidia_driver_cuda_repo_key_url": DOWNLOAD_URL,
    "nvidia_driver_reboot_timeout": POSITIVE,
    # slurm.conf and slurmdbd.conf
    "slurm_controller_port": PORT,
    "slurm_dbd_port": PORT,
    "slurm_health_interval": COUNT,
    "slurm_topology_block_size": COUNT,
    # the validate role's commands (srun, scontrol, the probes) and directories
    "validate_libexec_dir": PATH,
    "validate_nccl_tests_dir": PATH,
    "validate_nccl_tests_image": scalar(formats.argument),
    "validate_torch_python": PROGRAM,
    "validate_cold_import_python": PROGRAM,
    "validate_cold_import_module": scalar(formats.python_module),
    "validate_probe_user": scalar(formats.user),
    "validate_reservation": NAME,
    "validate_reservation_minutes": POSITIVE,
    "validate_srun_timeout_s": POSITIVE,
    "validate_burn_in_seconds": COUNT,
    "validate_scratch_paths": PATHS,
    "validate_nodes": each(NAME),
}


class SettingError(ValueError):
    """A value its file cannot hold; the message names the variable."""


def _raising(name: str, kind: Kind) -> Callable[[Any, Any], None]:
    def check(value: Any, _groups: Any = None) -> None:
        if problem := kind(name, value):
            raise SettingError(problem)

    return check


# As kiln.inventory.checks.VALUE_CHECKS takes them (kiln.roles: INVENTORY_CHECKS).
INVENTORY_CHECKS = {name: (kind.type, _raising(name, kind)) for name, kind in KINDS.items()}
