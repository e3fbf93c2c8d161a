"""`kiln rollout`: apply the declared state to a live cluster in batches, a campaign
(kiln.campaigns.campaign) whose rounds are the batches.

    plan (site.yml in check mode) ─▶ service hosts, one at a time ─▶ per batch:
        drain ─▶ wait for its jobs ─▶ apply (--limit) ─▶ reboot ─▶ back with its GRES
        ─▶ health check + validate ─▶ resume the nodes that pass
    ─▶ stop rule ─▶ next batch ... ─▶ report

Never more than `max_unavailable` compute nodes are out of service at once, counting
those already down or drained. The record (kiln.rollout.record) is written after every
step, so `--resume` carries on where a run was cut short.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from kiln import files, hostlist, inventory
from kiln.campaigns import campaign
from kiln.campaigns import validate as validation
from kiln.campaigns.campaign import Outcome
from kiln.errors import ExitCode, InputError, KilnError
from kiln.health import VERDICTS
from kiln.node import slurm_jobs, slurm_state
from kiln.report import model
from kiln.roles.nvidia_driver import reboots
from kiln.rollout import plan as planning
from kiln.rollout import record as records
from kiln.rollout import waits
from kiln.rollout.record import Record, Step
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation.verdicts import Judgement, Verdict

SUITE = "rollout"
POLL_S = 10  # between two looks at the nodes while waiting
WAIT_CHUNK_S = 600  # one step run waits at most this long, then Kiln looks again
BACK_TIMEOUT_S = 1800  # a node not back this long after its reboot has failed
APPLYING = "applying the change"


@dataclass(kw_only=True)
class Request(campaign.Request):
    max_unavailable: str | None = None  # None: the inventory's rollout_max_unavailable
    max_failures: int = 1
    wait_for_jobs: str | None = None
    deadline: str | None = None
    at_deadline: str = "skip"
    tags: str | None = None
    suites: list[str] = field(default_factory=lambda: list(validation.SUITES))
    resume: str | None = None
    say: Callable[[str], None] = lambda line: None  # progress lines for people


@dataclass
class View:
    """The controller's view after a step: every node's state, the jobs, the ping."""

    states: dict[str, slurm_state.NodeState]
    jobs: str
    ping: str


class Rollout(campaign.Campaign):
    kind = "rollout"

    def __init__(self, request: Request) -> None:
        spec = request.inventory
        if request.resume:
            self.record = records.load(request.resume, spec.path)
            options = self.record.options
            nodes = options.nodes
        else:
            nodes = campaign.select_nodes(spec, request.nodes, "roll out to")
            unreadable: list[str] = []
            if cut_short := records.unfinished(spec.path, unreadable):
                raise records.Resumable(
                    f"rollout {cut_short[0]} on this inventory was cut short", cut_short[0]
                )
            self.record = Record(
                id=records.new_id(),
                inventory=str(spec.path),
                started=model.now(),
                options=new_options(request, spec, nodes),
            )
            for problem in unreadable:  # said, and kept in the new record's notes
                self.record.notes.append(f"left out: {problem}")
                request.say(f"left out: {problem}")
            options = self.record.options
        compute = spec.group("slurm_compute")
        self.compute = [n for n in compute if n in (nodes or compute)]
        controller = spec.group("slurm_controller")[0]
        profile = campaign.choose_profile(spec, controller, request.profile)
        super().__init__(request, self.compute, profile, [SUITE], report_id=self.record.id)
        self.request = request
        self.options = options
        self.say = request.say

    # --- the plan --------------------------------------------------------------------

    def make_plan(self) -> planning.Plan:
        """site.yml in check mode on the chosen nodes and the service hosts, then the
        batches; refused when the cluster has no room for one more node out."""
        from kiln import drift
        from kiln.run import record

        services = [h for g in planning.SERVICE_ORDER for h in self.spec.group(g)]
        hosts = [*dict.fromkeys([*services, *self.compute])]
        # A node waiting for a reboot (the driver role's kiln_reboots) is listed in check
        # mode too; the role's own reboots are check-mode safe.
        summary = self.site(hosts, check=True)
        _kept, run_dir = record.find(summary.run)
        changes = planning.touched(drift.task_drift(record.load_events(run_dir)))
        changes.update(dict.fromkeys(summary.reboots, True))
        unreached = drift.unchecked(summary.failures)
        failed_services = [h for h in unreached if h not in self.compute]
        if failed_services or summary.error:
            first = summary.error or f"{failed_services[0]}: {unreached[failed_services[0]]}"
            raise KilnError(
                f"the plan could not be made: {first} (kiln runs show {summary.run})",
                summary.exit_code if summary.exit_code != ExitCode.OK else ExitCode.FAILED,
            )
        view = self.look()
        out = [n for n in self.spec.group("slurm_compute") if _out(view, n)]
        room = self.options.max_unavailable - len(out)
        if room <= 0:
            raise InputError(
                f"{len(out)} compute node{'' if len(out) == 1 else 's'} out of service "
                f"({hostlist.compress(out)}): with at most {self.options.max_unavailable} out "
                "at once, no batch has room"
            )
        return planning.make_plan(self.spec, self.compute, changes, view.states, room, unreached)

    def start(self, plan: planning.Plan) -> None:
        self.record.plan = plan.to_dict()
        self.record.services = [Step([h]) for h in plan.services]
        self.record.batches = [
            Step(batch, reboot=[n for n in batch if n in plan.reboot]) for batch in plan.batches
        ]
        self.save()

    # --- the flow ---------------------------------------------------------------------

    def execute(self) -> Outcome:
        record = self.record
        if self.request.resume and record.status == records.STOPPED:
            self.recheck_failed()
        record.status = records.RUNNING
        self.save()
        try:
            for step in record.services:
                if not step.finished:
                    self.service(step)
            for index, step in enumerate(record.batches, 1):
                if step.finished:
                    continue
                if len(record.failed) >= self.options.max_failures:
                    return self.stop(
                        f"stopped before batch {index}: {len(record.failed)} node(s) failed "
                        f"(--max-failures {self.options.max_failures})"
                    )
                if not self.batch(index, step):
                    return self.stop(record.notes[-1])
        except KeyboardInterrupt:
            self.save()
            record.notes.append(f"interrupted: `kiln rollout --resume {record.id}` carries on")
            return Outcome(canceled=True, reasons=self.reasons())
        except records.Resumable:
            raise
        except KilnError as exc:  # half done: nodes may be drained; resume carries on
            self.save()
            raise records.Resumable(exc.message, record.id, exc.exit_code) from None
        if record.failed:  # the last batches' failures: resume checks them again
            return self.stop(f"{len(record.failed)} node(s) failed")
        record.status = records.FINISHED
        self.save()
        return Outcome(reasons=self.reasons())

    def stop(self, why: str) -> Outcome:
        self.record.status = records.STOPPED
        if self.record.notes[-1:] != [why]:
            self.record.notes.append(why)
        fix = "fix the failed nodes" if self.record.failed else "once nodes are back in service"
        self.record.notes.append(f"{fix}, then `kiln rollout --resume {self.record.id}`")
        self.save()
        return Outcome(reasons=self.reasons())

    def service(self, step: Step) -> None:
        """A controller, login or storage host alone: apply, then wait until the
        controller answers; the compute nodes wait for a healthy controller."""
        [host] = step.nodes
        self.say(f"{host}: applying")
        step.failed.pop(host, None)  # a resume after its fix tries it again
        summary = self.apply([host])
        if summary.failures or summary.error:
            why = summary.error or f"{summary.failures[0].task}: {summary.failures[0].message}"
            step.failed[host] = why
            self.save()
            raise records.Resumable(
                f"{host}: the change failed there ({why}); no compute node was touched "
                f"(kiln runs show {summary.run})",
                self.record.id,
                ExitCode.HOSTS_FAILED,
            )
        self.mark(step, "applied")
        view = self.step(wait=self.wait(waits.CONTROLLER, [], BACK_TIMEOUT_S, ["scontrol", "ping"]))
        if not waits.controller_up(view.ping):
            raise records.Resumable(
                f"{host}: slurmctld does not answer after the change ({view.ping.strip()}); "
                "no compute node was touched",
                self.record.id,
                ExitCode.HOSTS_FAILED,
            )
        self.mark(step, "resumed")

    def batch(self, index: int, step: Step) -> bool:
        """One batch through every step; False when the rollout must stop (no room)."""
        total = len(self.record.batches)
        named = f"batch {index}/{total} {hostlist.compress(step.nodes)}"
        if "drained" not in step.done:
            view = self.look()
            for node in step.nodes:
                if node not in view.states:
                    step.failed.setdefault(node, "Slurm does not know this node")
            others = [n for n in self.spec.group("slurm_compute") if n not in step.nodes]
            out = [n for n in others if _out(view, n)]
            room = self.options.max_unavailable - len(out)
            if room < 1:
                self.step([slurm_jobs.resume(n) for n in self.ours(view, step.nodes)])
                self.record.notes.append(
                    f"stopped before batch {index}: {len(out)} compute node(s) out of service "
                    f"({hostlist.compress(out)}), at most {self.options.max_unavailable} may be"
                )
                return False
            if room < len(step.nodes):  # the rest waits for a batch of its own
                rest = Step(step.nodes[room:], [n for n in step.reboot if n in step.nodes[room:]])
                step.nodes, step.reboot = (
                    step.nodes[:room],
                    [n for n in step.reboot if n in step.nodes[:room]],
                )
                self.record.batches.insert(self.record.batches.index(step) + 1, rest)
                named = f"batch {index} {hostlist.compress(step.nodes)}"
            step.done["started"] = model.now()
            self.say(f"{named}: draining, waiting for its jobs to end")
            reason = drain.reason(f"rollout {self.record.id}: {APPLYING}")
            known = [n for n in step.nodes if n in view.states]
            drains = [slurm_jobs.drain(n, reason) for n in known if not view.states[n].drained]
            view = self.step(drains, self.wait(waits.IDLE, known, self.wait_left(step)))
            self.mark(step, "drained")
        else:
            view = None
        if "idle" not in step.done:
            self.wait_idle(step, view)
            self.mark(step, "idle")
        active = [n for n in step.nodes if n not in step.skipped and n in self.known(step)]
        if "applied" not in step.done:
            self.say(f"{named}: applying")
            summary = self.apply(active)
            beside = [f for f in summary.failures if f.host not in active]
            if summary.error or beside:  # the run itself, or a controller, failed
                why = summary.error or f"{beside[0].host}: {beside[0].task}: {beside[0].message}"
                raise records.Resumable(
                    f"the change failed outside the batch: {why} (kiln runs show {summary.run})",
                    self.record.id,
                    ExitCode.HOSTS_FAILED,
                )
            for failure in summary.failures:
                step.failed.setdefault(failure.host, f"apply: {failure.task}: {failure.message}")
            # The driver role's: a new module waits to load (kiln_reboots).
            step.reboot = sorted({*step.reboot, *(n for n in summary.reboots if n in active)})
            self.mark(step, "applied")
        ok = [n for n in active if n not in step.failed]
        if "rebooted" not in step.done:
            rebooting = [n for n in step.reboot if n in ok]
            if rebooting:  # Slurm reboots them, then Kiln waits for slurmd with its GRES
                self.say(f"{named}: rebooting {hostlist.compress(rebooting)}")
                # Drained and idle already: Slurm reboots them now and they come back
                # drained (this rollout's reason is re-set before the checks).
                argv = slurm_jobs.reboot_drained(rebooting)
                asked = [] if "reboot_asked" in step.done else [argv]  # never twice
                step.done.setdefault("reboot_asked", model.now())
                view = self.step(asked, self.wait(waits.BACK, rebooting, BACK_TIMEOUT_S))
                for node, why in waits.not_back(view.states, rebooting).items():
                    step.failed.setdefault(node, why)
                # Whatever reason the reboot left, the node is this rollout's until checked.
                reason = drain.reason(f"rollout {self.record.id}: rebooted, checking")
                back = [n for n in rebooting if n not in step.failed]
                self.step([slurm_jobs.drain(n, reason) for n in back])
            self.mark(step, "rebooted")
        ok = [n for n in active if n not in step.failed]
        if "checked" not in step.done:
            self.say(f"{named}: health check and validation")
            self.check(step, ok)
            self.mark(step, "checked")
        if "resumed" not in step.done:
            self.finish(step, active)
            self.mark(step, "resumed")
        return True

    def deadline(self, step: Step) -> datetime | None:
        """--deadline, or the batch's own start plus --wait-for-jobs."""
        if self.options.deadline:
            return datetime.fromisoformat(self.options.deadline)
        if self.options.wait_s is not None:
            return _t(step.done["started"]) + timedelta(seconds=self.options.wait_s)
        return None

    def wait_left(self, step: Step) -> int:
        """Seconds one wait may take: a chunk, or what is left before the deadline."""
        deadline = self.deadline(step)
        if deadline is None:
            return WAIT_CHUNK_S
        left = deadline - datetime.now(UTC)
        return max(0, min(WAIT_CHUNK_S, int(left.total_seconds())))

    def known(self, step: Step) -> list[str]:
        return [n for n in step.nodes if step.failed.get(n) != "Slurm does not know this node"]

    def wait_idle(self, step: Step, view: "View | None") -> None:
        """Until the batch's jobs end, or the deadline: then requeue their jobs, or leave
        the busy nodes out of this rollout (resumed, as they were)."""
        nodes = self.known(step)
        while True:
            if view is None:
                view = self.step(wait=self.wait(waits.IDLE, nodes, self.wait_left(step)))
            busy = [n for n in nodes if not waits.idle(view.states, [n])]
            if not busy:
                return
            if self.deadline(step) is not None and not self.wait_left(step):
                break
            view = None
        if self.options.at_deadline == "requeue":
            jobs = _jobs_on(view.jobs, busy)
            self.say(f"deadline: requeueing job(s) {','.join(jobs)}")
            # One at a time, a refusal (a job that cannot be requeued) aside.
            self.step(tries=[["scontrol", "requeue", job] for job in jobs])
            view = self.step(wait=self.wait(waits.IDLE, nodes, WAIT_CHUNK_S))
            busy = [n for n in nodes if not waits.idle(view.states, [n])]
        for node in busy:
            step.skipped[node] = "its jobs ran past the deadline: left as it was"
        ours = self.ours(view, busy)
        if ours:
            self.step([slurm_jobs.resume(n) for n in ours])

    def check(self, step: Step, nodes: list[str]) -> None:
        """kiln-health, then `kiln validate --nodes <batch>` (which resumes the nodes
        Kiln drained that pass, and drains the failing with their reason)."""
        from kiln import health_check

        if not nodes:
            return
        found = health_check.check(self.spec, nodes, self.display, False)
        self.record.runs.append(found.summary.run)
        if found.summary.status == "canceled":
            raise KeyboardInterrupt
        judged: list[Judgement] = []
        for node in found.nodes:
            if node.error:
                judged.append(
                    Judgement(node.node, "health", "", None, "", Verdict.UNCHECKED, node.error)
                )
            judged += [
                Judgement(
                    node.node, f"health.{r.check}", "", None, "", VERDICTS[r.status], r.reason
                )
                for r in node.results
            ]
        # A node the health check failed is not validated: validate would resume it.
        failed_health = {
            n.node: (n.error or next(f"health.{r.check}: {r.reason}" for r in n.results
                                     if VERDICTS[r.status] is Verdict.FAIL))
            for n in found.nodes if n.verdict not in drain.PASSING
        }  # fmt: skip
        for node, why in failed_health.items():
            step.failed.setdefault(node, why)
        nodes = [n for n in nodes if n not in failed_health]
        self.record.judgements += [j.to_dict() for j in judged]
        judged = []
        if not nodes:
            return
        request = validation.Request(
            inventory=self.spec,
            profile=self.options.profile,
            nodes=nodes,
            suites=self.options.suites,
            suites_named=True,
            display=self.display,
            lock=self.lock,
        )
        report, code = validation.Validation(request).run()
        self.record.runs += report.runs
        self.record.notes.append(f"{hostlist.compress(nodes)}: validation report {report.id}")
        if code == ExitCode.INTERRUPTED:  # validate judged nothing: check again on resume
            raise KeyboardInterrupt
        judged += [j for j in report.judgements if j.node in nodes]
        self.record.judgements += [j.to_dict() for j in judged]
        checked = model.Report(
            id="", started="", inventory="", profile=None, suites=[], nodes=nodes,
            judgements=judged,
        )  # fmt: skip
        for node, verdict in checked.judge_nodes().items():
            if verdict.verdict not in drain.PASSING:
                step.failed.setdefault(node, verdict.reasons[0] if verdict.reasons else "failed")

    def finish(self, step: Step, active: list[str]) -> None:
        """Resume the batch's nodes that passed and still carry this rollout's drain;
        a failing node stays drained, with the reason that failed it."""
        view = self.look()
        ok = [n for n in active if n not in step.failed]
        for node, why in waits.not_back(view.states, ok).items():  # GRES, registration
            step.failed.setdefault(node, why)
        ours = self.ours(view, active)
        commands = [slurm_jobs.resume(n) for n in ours if n not in step.failed]
        # Kiln's own drains (this rollout's, validate's) name the rollout; a health
        # check's drain is the check's to lift, someone else's is theirs.
        commands += [
            slurm_jobs.drain(n, drain.reason(f"rollout {self.record.id}: {why}"))
            for n, why in step.failed.items()
            if n in view.states and _kiln_or_none(view.states[n])
        ]
        if commands:
            self.step(commands)
        for node, why in step.failed.items():
            self.say(f"{node}: failed: {why}")

    def recheck_failed(self) -> None:
        """Resuming a stopped rollout: the nodes that failed (fixed since, presumably)
        are applied and checked again, before the batches left."""
        for step in list(self.record.batches):
            if not step.failed:
                continue
            self.record.notes.append(
                f"checked again on --resume: {hostlist.compress(step.failed)} "
                f"(failed: {'; '.join(step.failed.values())})"
            )
            # Every step again (room, drain, wait: the node may be back in service).
            retry = Step(sorted(step.failed, key=hostlist.sort_key))
            # Judged again: the failed check's judgements are in the note above.
            self.record.judgements = [
                j for j in self.record.judgements if j["node"] not in step.failed
            ]
            retry.reboot = [n for n in step.reboot if n in step.failed]
            step.failed = {}
            index = self.record.batches.index(step)
            self.record.batches.insert(index + 1, retry)

    # --- the pieces -------------------------------------------------------------------

    def apply(self, hosts: list[str]) -> RunSummary:
        """site.yml (or its tags) on the hosts, the controllers with them (their facts)."""
        controllers = self.spec.group("slurm_controller")
        return self.site([*dict.fromkeys([*controllers, *hosts])])

    def site(self, hosts: list[str], check: bool = False) -> RunSummary:
        """site.yml (or the rollout's tags) on `hosts`, as the rollout runs it (the driver
        role leaves reboots to it: kiln_rollout), kept in the record; Ctrl-C stops here."""
        from kiln.run.execute import RunRequest, run_playbook

        summary = run_playbook(
            RunRequest(
                playbook="site.yml",
                inventory=self.spec,
                limit=",".join(hosts),
                tags=self.options.tags,
                check=check,
                diff=check,
                extravars={"kiln_rollout": True},
                display=self.display,
                lock=self.lock,
            )
        )
        self.record.runs.append(summary.run)
        if summary.status == "canceled":
            raise KeyboardInterrupt
        return summary

    def wait(
        self, kind: str, nodes: list[str], seconds: int, argv: list[str] | None = None
    ) -> dict:
        return {
            "kind": kind,
            "nodes": nodes,
            "argv": argv or slurm_jobs.show_nodes(nodes),
            "retries": max(0, seconds // POLL_S),
            "delay": POLL_S,
        }

    def step(
        self,
        commands: list[list[str]] | None = None,
        wait: dict | None = None,
        tries: list[list[str]] | None = None,
    ) -> View:
        """rollout-step.yml on the controller; the view it brings back, sampled into
        the free capacity over time."""
        from kiln.run.gather import gather

        extravars: dict[str, Any] = {
            "rollout_commands": commands or [],
            "rollout_tries": tries or [],
        }
        if wait is not None:
            extravars["rollout_wait"] = wait
        gathered = gather(
            "rollout-step.yml", self.spec, [self.controller], self.display, "rollout_dir", extravars
        )
        self.record.runs.append(gathered.summary.run)
        if gathered.summary.status == "canceled":
            raise KeyboardInterrupt
        if self.controller not in gathered.texts or gathered.summary.failures:
            why = gathered.errors.get(self.controller) or gathered.summary.failures[0].message
            self.save()
            raise records.Resumable(
                f"{self.controller}: a rollout step failed in Slurm: {why} "
                f"(kiln runs show {gathered.summary.run})",
                self.record.id,
                ExitCode.HOSTS_FAILED,
            )
        data = gathered.json(self.controller)
        view = View(slurm_state.parse(data["states"]), data["jobs"], data["ping"])
        compute = self.spec.group("slurm_compute")
        self.record.capacity.append([model.now(), waits.free(view.states, compute)])
        return view

    def look(self) -> View:
        return self.step()

    def ours(self, view: View, nodes: list[str]) -> list[str]:
        """Of `nodes`, those drained with this rollout's reason."""
        mine = drain.reason(f"rollout {self.record.id}:")
        return [n for n in nodes if n in view.states and view.states[n].drained
                and view.states[n].reason.startswith(mine)]  # fmt: skip

    def mark(self, step: Step, name: str) -> None:
        step.done[name] = model.now()
        self.save()

    def save(self) -> None:
        self.record.runs = list(dict.fromkeys(self.record.runs))
        records.save(self.record)

    def reasons(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for step in self.record.batches:
            for node in step.nodes:
                if node in step.failed:
                    found[node] = [step.failed[node]]
                elif node in step.skipped:
                    found[node] = [step.skipped[node]]
                elif not step.finished:
                    found.setdefault(node, ["not rolled out (the rollout did not reach it)"])
        return found

    # --- the end: verdicts, report ------------------------------------------------------

    def conclude(self, outcome: Outcome) -> drain.Actions:
        """Each node's verdict; Slurm was acted on batch by batch already."""
        report, record = self.report, self.record
        report.started = record.started
        report.judgements = [_judgement(j) for j in record.judgements]
        for step in record.batches:
            report.judgements += [
                Judgement(n, "rollout.node", "", None, "", Verdict.FAIL, why)
                for n, why in step.failed.items()
            ]
            report.judgements += [
                Judgement(n, "rollout.wait", "", None, "", Verdict.UNCHECKED, why)
                for n, why in step.skipped.items()
            ]
            if not step.finished:
                report.judgements += [
                    Judgement(n, "rollout.batch", "", None, "", Verdict.UNCHECKED,
                              "not rolled out (the rollout did not reach it)")
                    for n in step.nodes if n not in step.failed
                ]  # fmt: skip
        planned = [n for s in record.batches for n in s.nodes]
        report.nodes = [*dict.fromkeys(planned)]
        report.positions = self.spec.positions(report.nodes)
        report.judge_nodes(outcome.reasons, unjudged=Verdict.PASS)
        shown = [f"plan: {p}" for p in planning.Plan(**record.plan).lines()] if record.plan else []
        report.notes = [*shown, *_timings(record), *record.notes]
        report.series = [_capacity(record)]
        report.runs = list(record.runs)
        report.actions = drain.Actions(
            drain={n: why for s in record.batches for n, why in s.failed.items()},
            resume=[n for s in record.batches if s.finished for n in s.nodes
                    if n not in s.failed and n not in s.skipped],
        ).to_dict()  # fmt: skip
        files.write_private(
            model.directory(report.id) / "rollout.json",
            files.json_text(record.to_json(), indent=1),
        )
        return drain.Actions()


def new_options(request: Request, spec: inventory.ClusterSpec, nodes: list[str]) -> records.Options:
    """The options checked before anything runs."""
    if request.max_failures < 1:
        raise planning.BadValue("max_failures", f"{request.max_failures}: at least 1")
    compute = len(spec.group("slurm_compute"))  # the share, and the count's ceiling
    if request.max_unavailable is not None:
        size = planning.max_unavailable(request.max_unavailable, compute)
    else:  # the inventory's setting
        controller = spec.group("slurm_controller")[0]
        limit = spec.hosts[controller].vars.get(
            reboots.MAX_UNAVAILABLE, reboots.MAX_UNAVAILABLE_DEFAULT
        )
        try:
            size = planning.max_unavailable(str(limit), compute)
        except planning.BadValue as exc:
            raise InputError(f"{spec.path}: rollout_max_unavailable {exc.message}") from None
    now = datetime.now().astimezone()
    when = planning.deadline(request.wait_for_jobs, request.deadline, now)
    wait_s = int((when - now).total_seconds()) if when and request.wait_for_jobs else None
    return records.Options(
        nodes=nodes,
        max_unavailable=size,
        max_failures=request.max_failures,
        deadline=when.astimezone(UTC).isoformat() if when and wait_s is None else None,
        wait_s=wait_s,
        at_deadline=request.at_deadline,
        tags=request.tags,
        suites=list(request.suites),
        profile=request.profile,
    )


def _kiln_or_none(seen: slurm_state.NodeState) -> bool:
    """Not drained, or drained by Kiln's validate or rollout (not its health check)."""
    return not seen.drained or seen.drained_by_kiln


def _out(view: View, node: str) -> bool:
    seen = view.states.get(node)
    return seen is None or bool(seen.flags & slurm_state.OUT_OF_SERVICE)


def _jobs_on(squeue: str, nodes: list[str]) -> list[str]:
    """Job ids running on any of `nodes` (squeue --format=%i|%T|%N)."""
    found = []
    for line in squeue.splitlines():
        job, _state, where = [*line.split("|"), "", ""][:3]
        if job and set(hostlist.expand(where)) & set(nodes):
            found.append(job)
    return found


def _judgement(data: dict[str, Any]) -> Judgement:
    return Judgement(**{**data, "verdict": Verdict(data["verdict"])})


def _timings(record: Record) -> list[str]:
    """Per batch, how long each step took."""
    lines = []
    for index, step in enumerate(record.batches, 1):
        times = step.done
        previous = times.get("started")
        parts = []
        for name in records.STEPS:
            if name in times and previous:
                seconds = (_t(times[name]) - _t(previous)).total_seconds()
                parts.append(f"{name} {seconds:.0f} s")
                previous = times[name]
        lines.append(
            f"batch {index} {hostlist.compress(step.nodes)}: " + (", ".join(parts) or "not started")
        )
    return lines


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _capacity(record: Record) -> model.Series:
    start = _t(record.capacity[0][0]) if record.capacity else None
    points = (
        [[(_t(t) - start).total_seconds(), float(free)] for t, free in record.capacity]
        if start
        else []
    )
    return model.Series(
        node="cluster", device="compute nodes in service", metric="free_nodes", points=points
    )


def rollout(request: Request) -> tuple[model.Report, ExitCode]:
    return Rollout(request).run()


def report_path(report: model.Report) -> Path:
    return campaign.report_path(report)
