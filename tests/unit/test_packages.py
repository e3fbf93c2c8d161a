"""kiln.packages: which packages of an apt task dpkg shows installed as asked, from
dpkg-query's real output on this machine and from recorded lines of every status."""

import subprocess
from pathlib import Path

import pytest

from kiln import packages

# dpkg-query -W -f=<QUERY_FORMAT> as it prints: a multi-arch library named with its
# architecture, a package removed with its configuration kept, one half-configured.
RECORDED = (
    "munge\t0.5.15-2\tinstalled\n"
    "libmunge2:amd64\t0.5.15-2\tinstalled\n"
    "slurm-client\t24.11.5-2\tinstalled\n"
    "lmod\t8.7.58-1\tconfig-files\n"
    "autofs\t5.1.9-1\thalf-configured\n"
)


def test_what_is_missing_from_recorded_dpkg_output():
    wanted = [
        "munge",
        "libmunge2",
        "libmunge2:amd64",
        "slurm-client=24.11.5-2",
        "slurm-client=24.11*",
        "slurm-client=23.11.4-1",
        "lmod",
        "autofs",
        "enroot",
    ]
    assert packages.missing(wanted, RECORDED) == [
        "slurm-client=23.11.4-1",
        "lmod",
        "autofs",
        "enroot",
    ]


@pytest.mark.parametrize(
    ("purge", "there"),
    [
        (False, ["munge", "libmunge2", "libmunge2:amd64", "autofs"]),
        (True, ["munge", "libmunge2", "libmunge2:amd64", "lmod", "autofs"]),
    ],
)
def test_what_a_remove_or_purge_leaves_to_apt_from_recorded_dpkg_output(purge, there):
    """Half-configured is apt's to remove; configuration kept only a purge's."""
    wanted = ["munge", "libmunge2", "libmunge2:amd64", "lmod", "autofs", "enroot"]
    assert packages.present(wanted, RECORDED, purge) == there


# apt-cache policy (LC_ALL=C) as it prints: at the candidate, pinned one version down,
# offered but not installed.
RECORDED_POLICY = (
    "munge:\n  Installed: 0.5.15-2\n  Candidate: 0.5.15-2\n  Version table:\n"
    " *** 0.5.15-2 500\n        500 http://deb.debian.org/debian trixie/main amd64 Packages\n"
    "        100 /var/lib/dpkg/status\n"
    "slurm-client:\n  Installed: 24.11.5-2\n  Candidate: 24.11.4-1\n  Version table:\n"
    " *** 24.11.5-2 100\n        100 /var/lib/dpkg/status\n     24.11.4-1 1001\n"
    "        500 http://deb.debian.org/debian trixie/main amd64 Packages\n"
    "enroot:\n  Installed: (none)\n  Candidate: 3.5.0-1\n  Version table:\n"
    "     3.5.0-1 500\n        500 https://example.invalid/enroot ./ Packages\n"
)


def test_what_is_off_apt_s_candidate_from_recorded_output():
    wanted = ["munge", "slurm-client", "enroot", "autofs", "kiln-no-such-package"]
    assert packages.outdated(wanted, RECORDED, RECORDED_POLICY) == wanted[1:]
    assert packages.outdated(["munge"], RECORDED, RECORDED_POLICY) == []


def test_a_real_apt_cache_policy_on_this_machine_reads_as_dpkg_does():
    """Essential packages, each at its candidate version or not, whichever this machine
    has: the outdated ones are those whose candidate is not dpkg's version."""
    names = ["dpkg", "coreutils", "bash", "grep"]
    policy = subprocess.run(packages.policy_argv(names), capture_output=True, text=True).stdout
    installed = subprocess.run(packages.query_argv(names), capture_output=True, text=True).stdout
    versions = dict(line.split("\t")[:2] for line in installed.splitlines())
    expected = [
        n
        for n in names
        if f"{n}:\n  Installed: {versions[n]}\n  Candidate: {versions[n]}\n" not in policy
    ]
    assert packages.outdated(names, installed, policy) == expected


@pytest.mark.parametrize(
    ("names", "understood"),
    [
        (["munge", "libmunge2:amd64", "slurm-client=24.11.5-2", "g++"], True),
        (["slurm-client=24.11*"], True),
        ([], False),
        (["nvidia-*"], False),
        (["slurm-client>=24"], False),
        (["slurm-client="], False),
        (["munge,slurm-client"], False),
        (["/tmp/enroot_3.5.0-1_amd64.deb"], False),
        (["slurm-client=24.11.[45]"], False),
    ],
)
def test_what_dpkg_alone_can_answer(names, understood):
    assert packages.understood(names) is understood


def test_a_real_dpkg_query_on_this_machine():
    names = ["dpkg", "coreutils", "kiln-no-such-package"]
    version = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "dpkg"], capture_output=True, text=True, check=True
    ).stdout
    done = subprocess.run(packages.query_argv(names), capture_output=True, text=True, check=False)
    assert done.returncode == 1  # what it prints for an unknown name goes to stderr
    assert packages.missing(names, done.stdout) == ["kiln-no-such-package"]
    pinned = [f"dpkg={version}", "coreutils", "dpkg=0.0-kiln"]
    done = subprocess.run(packages.query_argv(pinned), capture_output=True, text=True, check=True)
    assert packages.missing(pinned, done.stdout) == ["dpkg=0.0-kiln"]


def recorded_apt(name: str) -> str:
    return (Path(__file__).parents[1] / "fixtures" / "apt" / name).read_text()


# apt's real output, on Debian 12 and 13, installing local .debs whose Depends name a
# package no source has (and, in the last, one at a version the sources lack).
@pytest.mark.parametrize(
    ("fixture", "unmet"),
    [
        (
            "unmet-bookworm.txt",
            [("enroot", "Depends", "kiln-no-such-package", "it is not installable")],
        ),
        (
            "unmet-trixie.txt",
            [("enroot", "Depends", "kiln-no-such-package", "it is not installable")],
        ),
        (
            "unmet-two-trixie.txt",
            [
                ("enroot", "Depends", "kiln-no-such-package", "it is not installable"),
                ("enroot", "Depends", "jq (>= 99)", "1.7.1-6+deb13u4 is to be installed"),
            ],
        ),
    ],
)
def test_what_apt_says_it_cannot_install(fixture, unmet):
    assert packages.unmet(recorded_apt(fixture)) == unmet


def test_alternatives_apt_cannot_install_and_no_account_at_all():
    output = (
        "The following packages have unmet dependencies:\n"
        " enroot : Depends: gawk but it is not installable or\n"
        "                   mawk but it is not installable\n"
        "          Depends: zstd but it is not going to be installed\n"
        "E: Unable to correct problems, you have held broken packages.\n"
    )
    assert packages.unmet(output) == [
        ("enroot", "Depends", "gawk", "it is not installable or mawk but it is not installable"),
        ("enroot", "Depends", "zstd", "it is not going to be installed"),
    ]
    assert packages.unmet("E: Could not get lock /var/lib/dpkg/lock-frontend\n") == []
