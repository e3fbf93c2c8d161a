"""`kiln rollout`: apply the declared state to a live cluster in batches, a campaign
(kiln.campaigns.campaign) whose rounds are the batches and that acts in Slurm per
round (`acts = PER_ROUND`): each batch drains and resumes its own nodes.

    plan (site.yml in check mode) ─▶ service hosts, one at a time ─▶ per batch, the
        state machine of kiln.rollout.batch: drained ─▶ idle ─▶ applied ─▶ rebooted
        ─▶ checked (kiln-health and the suites, judging only) ─▶ resumed
    ─▶ stop rule ─▶ next batch ... ─▶ report (kiln.rollout.summary)

Never more than `max_unavailable` compute nodes are out of service at once, counting
those already down or drained. The record (kiln.rollout.progress) is written after every
transition, so `--resume` carries on from the state it recorded.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kiln import files, health, hostlist, inventory
from kiln.campaigns import campaign
from kiln.campaigns import validate as validation
from kiln.campaigns.campaign import Outcome
from kiln.errors import ExitCode, InputError, KilnError
from kiln.report import document
from kiln.roles.nvidia_driver import reboots
from kiln.rollout import plan as planning
from kiln.rollout import progress as records
from kiln.rollout import summary as parts
from kiln.rollout import waits
from kiln.rollout.batch import BACK_TIMEOUT_S, Batch, Failures, View, out_of_service, wait
from kiln.rollout.progress import Record, Step
from kiln.run.events import RunSummary
from kiln.validation import drain
from kiln.validation.verdicts import Judgement, Verdict
from kiln_node import slurm_state

SUITE = "rollout"
__all__ = ["Request", "Rollout", "View", "rollout"]


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


class Rollout(campaign.Campaign):
    kind = "rollout"
    acts = campaign.PER_ROUND

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
                started=document.now(),
                options=new_options(request, spec, nodes),
            )
            for problem in unreadable:  # said, and kept in the new record's notes
                self.record.notes.append(f"left out: {problem}")
                request.say(f"left out: {problem}")
            options = self.record.options
        compute = spec.group("slurm_compute")
        self.cluster = compute  # the room counts every compute node
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
        out = [n for n in self.cluster if out_of_service(view, n)]
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
                if not Batch(self, index, step).run():
                    return self.stop(record.notes[-1])
        except KeyboardInterrupt:
            self.save()
            record.notes.append(f"interrupted: `kiln rollout --resume {record.id}` carries on")
            return Outcome(canceled=True, reasons=parts.reasons(record))
        except records.Resumable:
            raise
        except KilnError as exc:  # half done: nodes may be drained; resume carries on
            self.save()
            raise records.Resumable(exc.message, record.id, exc.exit_code) from None
        if record.failed:  # the last batches' failures: resume checks them again
            return self.stop(f"{len(record.failed)} node(s) failed")
        record.status = records.FINISHED
        self.save()
        return Outcome(reasons=parts.reasons(self.record))

    def stop(self, why: str) -> Outcome:
        self.record.status = records.STOPPED
        if self.record.notes[-1:] != [why]:
            self.record.notes.append(why)
        fix = "fix the failed nodes" if self.record.failed else "once nodes are back in service"
        self.record.notes.append(f"{fix}, then `kiln rollout --resume {self.record.id}`")
        self.save()
        return Outcome(reasons=parts.reasons(self.record))

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
        view = self.step(wait=wait(waits.CONTROLLER, [], BACK_TIMEOUT_S, ["scontrol", "ping"]))
        if not waits.controller_up(view.ping):
            raise records.Resumable(
                f"{host}: slurmctld does not answer after the change ({view.ping.strip()}); "
                "no compute node was touched",
                self.record.id,
                ExitCode.HOSTS_FAILED,
            )
        self.mark(step, "resumed")

    def check(self, nodes: list[str]) -> Failures:
        """The batch's judgement, and only that (its state machine drains and resumes):
        kiln-health, then the suites (a Validation that judges only, `acted_by`) on
        the nodes it passed; each node that did not pass, failed or not checked
        (health.judgements' rule for a node that could not report), with its first
        reason. kiln-health runs with Slurm (its slurmd check), and by its own rule
        acts on no node drained with another reason than its own: the rollout's."""
        from kiln.health import check as health_check

        found = health_check.check(self.spec, nodes, self.display, False)
        self.record.runs.append(found.summary.run)
        if found.summary.status == "canceled":
            raise KeyboardInterrupt
        judged = health.judgements(found.nodes)
        self.record.judgements += [j.to_dict() for j in judged]
        failures = _not_passing(judged, nodes)
        # A node the health check did not pass is not loaded with the suites.
        nodes = [n for n in nodes if n not in failures]
        if not nodes:
            return failures
        request = validation.Request(
            inventory=self.spec,
            profile=self.options.profile,
            nodes=nodes,
            suites=self.options.suites,
            suites_named=True,
            display=self.display,
            lock=self.lock,
            acted_by=f"rollout {self.record.id}",
        )
        report, code = validation.Validation(request).run()
        self.record.runs += report.runs
        self.record.notes.append(f"{hostlist.compress(nodes)}: validation report {report.id}")
        if code == ExitCode.INTERRUPTED:  # validate judged nothing: check again on resume
            raise KeyboardInterrupt
        judged = [j for j in report.judgements if j.node in nodes]
        self.record.judgements += [j.to_dict() for j in judged]
        return failures | _not_passing(judged, nodes)

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
            step.failed, step.unchecked = {}, []
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

    def step(
        self,
        commands: list[list[str]] | None = None,
        wait: dict | None = None,
        tries: list[list[str]] | None = None,
    ) -> View:
        """rollout_step.yml on the controller; the view it brings back, sampled into
        the free capacity over time."""
        from kiln.run.gather import gather

        extravars: dict[str, Any] = {
            "rollout_commands": commands or [],
            "rollout_tries": tries or [],
        }
        if wait is not None:
            extravars["rollout_wait"] = wait
        gathered = gather(
            "rollout_step.yml", self.spec, [self.controller], self.display, "rollout_dir", extravars
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
        self.record.capacity.append([document.now(), waits.free(view.states, compute)])
        return view

    def look(self) -> View:
        return self.step()

    def mark(self, step: Step, name: str) -> None:
        step.done[name] = document.now()
        self.save()

    def save(self) -> None:
        self.record.runs = list(dict.fromkeys(self.record.runs))
        records.save(self.record)

    # --- the end: verdicts, report ------------------------------------------------------

    def judge(self, outcome: Outcome) -> None:
        """Each node's verdict from the record (kiln.rollout.summary); Slurm was acted
        on batch by batch already, and the report says what each batch did."""
        report, record = self.report, self.record
        report.started = record.started
        report.judgements = parts.judgements(record)
        report.nodes = parts.planned(record)
        report.positions = self.spec.positions(report.nodes)
        report.judge_nodes(outcome.reasons, unjudged=Verdict.PASS)
        report.notes = parts.notes(record)
        report.series = [parts.capacity(record)]
        report.runs = list(record.runs)
        report.actions = parts.actions(record).to_dict()
        files.write_private(
            document.directory(report.id) / "rollout.json",
            files.json_text(record.to_json(), indent=1),
        )


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


def _not_passing(judged: list[Judgement], nodes: list[str]) -> Failures:
    """Of `nodes`, those whose judgements do not pass (kiln.validation.assess.per_node),
    with their verdict and first reason."""
    checked = document.Report(
        id="", started="", inventory="", profile=None, suites=[], nodes=nodes,
        judgements=judged,
    )  # fmt: skip
    return {
        node: (verdict.verdict, verdict.reasons[0] if verdict.reasons else "failed")
        for node, verdict in checked.judge_nodes().items()
        if verdict.verdict not in drain.PASSING
    }


def rollout(request: Request) -> tuple[document.Report, ExitCode]:
    return Rollout(request).run()


def report_path(report: document.Report) -> Path:
    return campaign.report_path(report)
