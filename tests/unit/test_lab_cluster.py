"""kiln lab up: node containers that stop as they start, and records of containers
that outlived their host."""

import pytest

from kiln.errors import ExitCode, InputError, KilnError
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


LAB = cluster.plan("t", 1, "trixie")


class FakeRecord:
    """podman's record of the lab's controller, which may have outlived the container."""

    def __init__(self, running: bool, alive: bool):
        self.running, self.alive = running, alive
        self.calls: list[tuple[str, ...]] = []
        self.logged: list[str] = []

    def inspect(self, kind, name):
        labels = {cluster.LABEL: "t"}
        return {"Config": {"Labels": labels}, "State": {"Running": self.running}}

    def podman(self, *args, check=True, stdin=None):
        self.calls.append(args)
        if args[0] == "start" and self.alive:
            self.running = True
        return ""

    def answers(self, name):
        return self.running and self.alive


def ensure(monkeypatch, record):
    for name in ("inspect", "podman", "answers"):
        monkeypatch.setattr(cluster, name, getattr(record, name))
    cluster._ensure_container(LAB, NODE, record.logged.append)


def test_a_running_container_that_answers_is_kept(monkeypatch):
    record = FakeRecord(running=True, alive=True)
    ensure(monkeypatch, record)
    assert (record.calls, record.logged) == ([], [])


def test_a_stopped_container_is_started(monkeypatch):
    record = FakeRecord(running=False, alive=True)
    ensure(monkeypatch, record)
    assert (record.calls, record.logged) == ([("start", "t-controller")], [])


@pytest.mark.parametrize("running", [True, False], ids=["listed-running", "stuck-stopping"])
def test_a_container_that_outlived_its_host_is_made_again(monkeypatch, running):
    # A host restored from a snapshot: podman lists the node running (or stuck stopping,
    # after a stop) and answers every exec with "cannot exec in a stopped container".
    record = FakeRecord(running=running, alive=False)
    ensure(monkeypatch, record)
    tried = [("start", "t-controller")] if not running else []
    assert record.calls == [
        *tried,
        ("rm", "--force", "--time", "2", "t-controller"),
        (
            "run",
            "--detach",
            "--name",
            "t-controller",
            "--hostname",
            "t-controller",
            "--network",
            "kiln-t",
            "--ip",
            NODE.address,
            "--privileged",
            "--systemd=always",
            "--no-hosts",
            "--label",
            "io.kiln.lab=t",
            "--label",
            "io.kiln.role=controller",
            "localhost/kiln-node:trixie",
            "/sbin/init",
        ),
    ]
    assert record.logged == [
        "t-controller does not start (podman's record outlived it): making it again"
    ]


@pytest.mark.parametrize("chosen", ["", "private", "host"])
def test_the_nodes_cgroup_namespace_is_podmans_unless_named(monkeypatch, chosen):
    monkeypatch.setenv(cluster.CGROUPNS, chosen)
    record = FakeRecord(running=False, alive=False)
    ensure(monkeypatch, record)
    made = record.calls[-1]
    assert [a for a in made if a.startswith("--cgroupns")] == (
        [f"--cgroupns={chosen}"] if chosen else []
    )


def test_a_cgroup_namespace_podman_does_not_know_is_refused_before_anything_is_made(
    monkeypatch,
):
    monkeypatch.setenv(cluster.CGROUPNS, "ns:/proc/1/ns/cgroup")
    monkeypatch.setattr(cluster.doctor, "require", lambda: pytest.fail("checked the host"))
    with pytest.raises(InputError) as refused:
        cluster.up("t", 1, "trixie", print)
    assert str(refused.value) == "KILN_LAB_CGROUPNS=ns:/proc/1/ns/cgroup: expected host or private"


NODE_IMAGE = "localhost/kiln-node:trixie"
BUILT = "localhost/kiln-image:e2e"


def images(lab: cluster.LabPlan) -> dict[str, str]:
    return {node.name.removeprefix("t-"): node.image for node in lab.nodes}


def test_every_node_boots_from_the_lab_node_image_by_default():
    assert images(cluster.plan("t", 2, "trixie")) == {
        "controller": NODE_IMAGE,
        "storage": NODE_IMAGE,
        "compute01": NODE_IMAGE,
        "compute02": NODE_IMAGE,
    }


def test_a_built_image_boots_the_compute_nodes_only():
    assert images(cluster.plan("t", 2, "trixie", BUILT)) == {
        "controller": NODE_IMAGE,
        "storage": NODE_IMAGE,
        "compute01": BUILT,
        "compute02": BUILT,
    }


def test_a_lab_completed_with_an_image_keeps_its_nodes_and_adds_from_the_image():
    before = cluster.plan("t", 2, "trixie")
    grown = cluster.plan("t", 3, "trixie", BUILT, previous=before)
    assert images(grown) == {
        "controller": NODE_IMAGE,
        "storage": NODE_IMAGE,
        "compute01": NODE_IMAGE,
        "compute02": NODE_IMAGE,
        "compute03": BUILT,
    }
    # Completed again without --image: compute03 stays the image's, compute04 is raw.
    again = cluster.plan("t", 4, "trixie", previous=grown)
    assert images(again)["compute03"] == BUILT
    assert images(again)["compute04"] == NODE_IMAGE


def test_a_node_is_made_from_its_planned_image(monkeypatch):
    lab = cluster.plan("t", 1, "trixie", BUILT)
    record = FakeRecord(running=False, alive=False)
    for name in ("inspect", "podman", "answers"):
        monkeypatch.setattr(cluster, name, getattr(record, name))
    cluster._ensure_container(lab, lab.nodes[-1], record.logged.append)
    made = record.calls[-1]
    assert made[-2:] == (BUILT, "/sbin/init")


def test_a_plan_written_before_nodes_recorded_their_image_reads_as_the_node_image(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("KILN_STATE_DIR", str(tmp_path))
    lab = cluster.plan("t", 1, "trixie", BUILT)
    cluster._save_plan(lab)
    path = cluster.paths.lab_state_dir("t") / "lab.json"
    data = cluster.files.read_json(path)
    for node in data["nodes"]:
        del node["image"]
    path.write_text(cluster.json.dumps(data))
    assert set(images(cluster.load_plan("t")).values()) == {NODE_IMAGE}
    cluster._save_plan(lab)
    assert cluster.load_plan("t") == lab


def labelled(labels: dict | None):
    """podman's inspect of an image with LABELS (None: podman has no such image)."""
    return lambda kind, name: None if labels is None else {"Config": {"Labels": labels}}


RECIPE = {"io.kiln.recipe": cluster.image.recipe_hash("trixie")}


@pytest.mark.parametrize(
    ("labels", "reason", "message"),
    [
        (None, "missing", "no such image in podman"),
        (RECIPE, "foreign", "not an image `kiln image build` made (no io.kiln.image label)"),
        (
            {"io.kiln.image": "run", "io.kiln.recipe": cluster.image.recipe_hash("bookworm")},
            "other-base",
            "not built from this lab's node image (localhost/kiln-node:trixie)",
        ),
    ],
    ids=["missing", "not-kiln-built", "other-release"],
)
def test_a_boot_image_kiln_did_not_build_from_the_lab_node_image_is_refused(
    monkeypatch, labels, reason, message
):
    monkeypatch.setattr(cluster, "inspect", labelled(labels))
    with pytest.raises(cluster.BootImageError) as refused:
        cluster.check_boot_image(BUILT, "trixie")
    assert (str(refused.value), refused.value.reason) == (message, reason)
    assert refused.value.exit_code == ExitCode.BAD_INPUT


def test_a_boot_image_kiln_built_from_the_lab_node_image_is_taken(monkeypatch):
    monkeypatch.setattr(cluster, "inspect", labelled({"io.kiln.image": "run", **RECIPE}))
    assert cluster.check_boot_image(BUILT, "trixie") == BUILT
