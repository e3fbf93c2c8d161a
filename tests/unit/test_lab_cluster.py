"""kiln lab up's check that a node container keeps running after it starts."""

import pytest

from kiln.errors import ExitCode, KilnError
from kiln.lab import cluster


class FakeContainer:
    """A container that stops as it boots the first `stops` times it is started."""

    def __init__(self, stops: int):
        self.stops = stops
        self.running = stops == 0
        self.calls: list[tuple[str, ...]] = []

    def inspect(self, kind, name):
        return {"State": {"Running": self.running, "ExitCode": 0 if self.running else 255}}

    def podman(self, *args, check=True, stdin=None):
        self.calls.append(args)
        if args[0] == "start":
            self.stops -= 1
            self.running = self.stops == 0
        if args[0] == "logs":
            return "systemd 257 running in system mode\nFreezing execution.\n"
        return ""


NODE = cluster.plan("t", 1, "trixie").nodes[0]


def run(monkeypatch, container):
    monkeypatch.setattr(cluster, "inspect", container.inspect)
    monkeypatch.setattr(cluster, "podman", container.podman)
    cluster._ensure_running(NODE, settle=0)


def test_a_running_node_is_left_alone(monkeypatch):
    container = FakeContainer(stops=0)
    run(monkeypatch, container)
    assert container.calls == []


def test_a_node_that_stopped_once_is_started_again(monkeypatch):
    container = FakeContainer(stops=1)
    run(monkeypatch, container)
    assert container.calls == [("start", "t-controller")]
    assert container.running


def test_a_node_that_stops_again_is_reported_with_its_last_log_line(monkeypatch):
    container = FakeContainer(stops=2)
    with pytest.raises(KilnError) as caught:
        run(monkeypatch, container)
    assert caught.value.exit_code == ExitCode.FAILED
    assert str(caught.value) == (
        "lab node t-controller stopped as it started (exit code 255, last log line:"
        " 'Freezing execution.'); `podman logs t-controller` has the rest"
    )
    assert container.calls == [("start", "t-controller"), ("logs", "--tail", "5", "t-controller")]
