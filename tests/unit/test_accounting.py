"""kiln accounting's dump file and QOS rules, on what `sacctmgr` printed in the lab
(Slurm 24.11.5, Debian 13): tests/fixtures/slurm/ holds `kiln accounting dump` of a lab
with one account, one user and a second QOS, and `sacctmgr -n -P show qos` of it."""

import json
from pathlib import Path

from kiln import accounting

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"
DUMP = FIXTURES / "accounting-dump-24.11.json"
SHOW_QOS = (FIXTURES / "show-qos-24.11.txt").read_text()
QOS = [
    {
        "Name": "normal",
        "Description": "Normal QOS default",
        "Priority": "0",
        "GraceTime": "00:00:00",
        "PreemptMode": "cluster",
        "UsageFactor": "1.000000",
    },
    {
        "Name": "e2e_long",
        "Description": "long-jobs",
        "Priority": "10",
        "Flags": "DenyOnLimit",
        "GraceTime": "00:00:00",
        "PreemptMode": "cluster",
        "UsageFactor": "1.000000",
        "MaxWall": "2-00:00:00",
    },
]


def test_a_recorded_dump_reads_whole():
    found = accounting.read(DUMP)
    assert (found.cluster, found.qos) == ("kiln-lab", QOS)
    # The template's commented examples ("# Account - 'cs'") are not accounts.
    assert found.names("Account") == ["e2e_team"]
    assert found.names("User") == ["e2e_alice", "root"]
    assert found.describe() == "cluster kiln-lab: 1 account, 2 users, 2 QOS"
    assert found.associations.splitlines()[-6:] == [
        "Cluster - 'kiln-lab':Fairshare=1:QOS='normal'",
        "Parent - 'root'",
        "User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1",
        "Account - 'e2e_team':Description='team':Organization='lab':Fairshare=1",
        "Parent - 'e2e_team'",
        "User - 'e2e_alice':DefaultAccount='e2e_team':DefaultQOS='normal':Fairshare=3:"
        "MaxJobs=7:QOS='e2e_long,normal'",
    ]


def test_the_qos_table_is_read_by_position_not_by_its_abbreviated_header():
    assert accounting.parse_qos(SHOW_QOS) == QOS
    assert accounting.parse_qos("") == []


def test_a_written_dump_reads_back_the_same_and_stays_private(tmp_path):
    found = accounting.read(DUMP)
    found.write(tmp_path / "out.json")
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o600
    assert accounting.read(tmp_path / "out.json") == found
    assert json.loads((tmp_path / "out.json").read_text()) == json.loads(DUMP.read_text())


def test_only_the_qos_that_differ_are_set_and_only_with_what_differs():
    current = SHOW_QOS.splitlines()
    assert accounting.qos_to_set(current, QOS) == []
    # e2e_long just created (`sacctmgr add qos e2e_long`): its name as description,
    # the defaults elsewhere.
    created = [current[0], "e2e_long|e2e_long|0||00:00:00|cluster||1.000000||||||||||"]
    assert accounting.qos_to_set(created, QOS) == [
        {
            "name": "e2e_long",
            "set": [
                "Description=long-jobs",
                "Priority=10",
                "Flags=DenyOnLimit",
                "MaxWall=2-00:00:00",
            ],
        }
    ]
    # sacctmgr shows GraceTime as a time and takes it in seconds.
    graced = [{"Name": "normal", "GraceTime": "1-00:05:10"}]
    assert accounting.qos_to_set(current, graced) == [
        {"name": "normal", "set": ["GraceTime=86710"]}
    ]
    # A setting only the new cluster has is kept: the dump does not name it.
    assert accounting.qos_to_set(current, [{"Name": "normal"}]) == []
