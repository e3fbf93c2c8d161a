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
