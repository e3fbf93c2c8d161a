"""kiln.formats: what each config file format Kiln writes lets a value hold. Each rule
takes what real configurations use and refuses what would end a string, start a new
setting or line, or be expanded; none accepts a value with a trailing newline ('$'
matches before one, which is why every rule uses re.fullmatch)."""

import argparse

import pytest

from kiln import formats
from tests.node_scripts import node_probe

TRAILING_NEWLINE = "\n"


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (
            formats.url,
            [
                "http://mirror.site:3142",
                "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/",
                "http://user:p%40ss@proxy:3128/",
                "file:/srv/mirror",
                "mirror+file:/etc/apt/mirrors.txt",
            ],
            [
                'http://p:3142"; APT::Update::Pre-Invoke {"id"};',
                "https://m/\nTrusted: yes",
                "http://m/ http://evil/",
                "",
            ],
        ),
        (
            formats.word,
            ["/usr/sbin/reboot", "CR_Core_Memory", "bf_interval=30,bf_max_job_test=500", "1-0"],
            ["a b", "a\tb", "x\nPrologSlurmctld=/x", 'a"b', "a#b", "a\\", ""],
        ),
        (
            formats.autofs_word,
            [":sshfs\\#backup\\:/dir", "nas:/home/&", "vers=4.2", "sec=krb5p"],
            ["nas:/s\n/evil -fstype=nfs evil:/", "a b", 'a"b', "a\\", ""],
        ),
        (
            formats.one_line,
            ["4096 87380 16777216", "a\tb", "", "infinity"],
            ["1\nkernel.y = 2", "1\r", "1\x00", "1\\"],
        ),
        (
            formats.slurm_time,
            ["INFINITE", "unlimited", "60", "30:00", "12:00:00", "2-0", "1-12:30", "7-00:00:00"],
            ["1:00:00\nPrologSlurmctld=/x", "1 day", "1:2:3:4", "\u0663", "-1", ""],
        ),
        (
            formats.slurm_key,
            ["Prolog", "SchedulerParameters", "MaxTime"],
            ["Prolog\n", "a=b", "Max Time", "_x", ""],
        ),
        (
            formats.enroot_path,
            [
                "/var/lib/enroot/runtime/user-$(id -u)",
                "/e/group-$(id -g)",
                "${XDG_RUNTIME_DIR}/enroot",
                "/e/${ENROOT_USER}",
            ],
            [
                "/e/$(reboot)",
                "/e/$(id -u; reboot)",
                "/e/`id`",
                "/e/$HOME",
                "/e/../etc",
                "/e/..",
                "relative",
                "/e/x y",
            ],
        ),
        (
            formats.enroot_value,
            ["-comp lzo -noD", "yes", "16", "${HOME}/.config/enroot", ""],
            ["-comp lzo; reboot", "$(reboot)", "`id`", "a|b", "a\nb", "'x'"],
        ),
        (
            formats.absolute_path,
            ["/", "/opt/hpcx", "/var/lib/prometheus/node-exporter", "/opt/x+y/v1.2_3"],
            [
                "relative/dir",
                "/srv/x/../../etc/cron.d",
                "/srv/x/..",
                "/srv/./x",
                "/srv//x",
                "//srv",
                "/srv/",
                "/srv/x --flag",
                "/srv/x\tb",
                "/srv/$HOME",
                "/srv/x\u0663",
                "",
            ],
        ),
        (
            formats.download_url,
            [
                "https://apt.grafana.com/gpg.key",
                "http://mirror:8080/keys/cuda.pub",
                "https://keyserver.ubuntu.com/pks/lookup?op=get&search=0x1",
                "file:///srv/mirror/key.asc",
                "ftp://mirror/pub/x",
            ],
            [
                "file:///../../etc/shadow",
                "https://mirror/a/../../b",
                "https://mirror/a/%2e%2E/b",
                "https://mirror/./a",
                "https:///no-host",
                "gopher://mirror/x",
                "mirror/x",
                "https://m/x y",
                "https://m/\nTrusted: yes",
                "",
            ],
        ),
        (
            formats.base_url,
            ["https://github.com/NVIDIA/enroot/releases/download", "file:///srv/mirror/enroot"],
            ["https://mirror/x?y=1", "https://mirror/x#frag", "file:///../../etc"],
        ),
        (
            formats.calendar,
            ["Sun *-*-* 03:00:00", "daily", "Mon..Fri 22:30", "*-*-1/2 4:00 Europe/Berlin", "@1"],
            ["daily;reboot", "daily\nExecStart=/x", "daily # x", "weekly\\", ""],
        ),
        (
            formats.ip_address,
            ["10.0.0.1", "fd00::1", "192.168.100.254"],
            ["gpu001", "10.0.0.256", "10.0.0.1/24", "10.0.0.1 10.0.0.2", ""],
        ),
        (
            formats.package,
            ["htop", "ca-certificates", "libstdc++6", "linux-headers-*", "nvidia-smi=550.*"],
            ["-oDpkg::Pre-Invoke::=id", "pigz squashfuse", "Htop", "a;b", "x=1 y", ""],
        ),
        (
            formats.apt_version,
            ["2.53.3+ds1-2", "1:2.0~rc1-1", "550.*", "1.5.0-1+b6"],
            ["2.53\nPin: origin *", "1 2", "", "*;x"],
        ),
        (
            formats.user,
            ["nobody", "kiln_probe", "u-1"],
            ["root;id", "Nobody", "a b", "-x", ""],
        ),
        (
            formats.program,
            ["python3", "/opt/venv/bin/python", "python3.12"],
            ["python3 -c x", "-c", "py;id", ""],
        ),
        (
            formats.argument,
            ["nvcr.io#nvidia/pytorch:24.01-py3", "docker://ubuntu", "/srv/images/nccl.sqsh"],
            ["--container-mounts=/:/host", "a b", "", "x\ty"],
        ),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_each_rule_takes_real_values_and_refuses_what_would_write_more(rule, good, bad):
    assert [v for v in good if rule(v)] == []
    refused = bad + [v + TRAILING_NEWLINE for v in good if v]
    assert [v for v in refused if not rule(v)] == []


def test_names_are_plain_ascii_names():
    assert [formats.is_name(n) for n in ["gpu001", "a.b_c-d", "9x"]] == [True] * 3
    refused = ["gpu001\n", "gpu 1", "gpu001,evil[1-9]", "-x", ".x", "gpu\u0663", "é", "", None, 5]
    assert [n for n in refused if formats.is_name(n)] == []


def test_the_node_probe_refuses_a_run_id_or_directory_name_with_a_trailing_newline():
    """roles/validate/files/kiln-validate-probe, which runs on the nodes as root."""
    assert node_probe.run_id("20261123-1200-ab") == "20261123-1200-ab"
    with pytest.raises(argparse.ArgumentTypeError, match="unsafe run id"):
        node_probe.run_id("20261123-1200-ab\n")
