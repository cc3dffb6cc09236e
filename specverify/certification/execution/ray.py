"""``--executor ray``: a run's parts as Ray tasks on engine actors, stored as they arrive (docs/ray.md).

The parts are the plan's (``plan.py``): whole scenarios, or with ``--block-draws`` a sampling scenario's blocks,
which change no count; the merge then gives the certificate the same run gives here, and its command runs without
Ray. Each actor is one engine host: it keeps its ``PartWorker`` (its runner and decoders) from one part to the next,
since engines are slow to start, and asks for the resources the factory declares (``factory.ray_resources``).
Answers are stored as they arrive (in a resume file with ``--resume``: a Ray run killed midway is continued by the
same command, on Ray or here); under sequential looks the merge reads a scenario's blocks in index order, and the
parts a decision made unneeded are cancelled. A part whose actor dies runs again from its start on a fresh actor
(the same counts); a part lost twice ends its decoder's run by DESIGN rule 1 (:func:`lost_part`). A budget is each
decoder's, kept here: its allocation is made by an actor (a pilot under a time budget), each whole scenario gets its
share when it is dispatched, and once the time is spent no part is dispatched (running ones stop at their next call).

Ray is imported only here, and only when a run asks for it (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable, Optional

from specverify.certification.execution.merge import needed
from specverify.certification.execution.plan import REPRODUCIBILITY, Part, Plan
from specverify.certification.execution.worker import broken_result, document
from specverify.certification.results.evidence import ScenarioResult
from specverify.enums import Isolation, NotRun
from specverify.errors import InvalidArgument, check

__all__ = ["DISTRIBUTION", "RayMissing", "import_ray", "ray_resources_of", "run_on_ray", "EngineHost", "lost_part"]

DISTRIBUTION = "specverify-toolkit"  # pyproject's [project] name: what `pip install` is given
RESOURCE_KEYS = ("num_cpus", "num_gpus", "memory", "resources")
DEFAULT_RESOURCES = {"num_cpus": 1}
ATTEMPTS = 2  # a part is run at most twice (one retry on a fresh actor)


class RayMissing(InvalidArgument):
    """``--executor ray`` without the ``ray`` extra installed (a usage error: exit code 2)."""


def import_ray():  # noqa: ANN201 - the ray module, imported lazily
    """The ``ray`` module, or :class:`RayMissing` saying which extra to install."""
    try:
        import ray
    except ImportError as exc:
        raise RayMissing(
            f'--executor ray needs Ray, which is not installed ({exc}): pip install "{DISTRIBUTION}[ray]" '
            "(or run with --executor local, the default)."
        ) from None
    return ray


def _resource_value(key: str, value: object, owner: str) -> None:
    if key == "resources":
        check(
            isinstance(value, dict) and all(isinstance(k, str) and k for k in value),
            f"{owner}.ray_resources['resources']={value!r} must be a dict of custom resource names to amounts, "
            "e.g. {'accelerator': 1}.",
        )
        for name, amount in value.items():
            _resource_value(f"resources.{name}", amount, owner)
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and value == value
    check(ok and value != float("inf"), f"{owner}.ray_resources[{key!r}]={value!r} must be a finite number >= 0.")


def ray_resources_of(factory: object) -> dict:
    """What one engine actor asks of the cluster: the factory's optional ``ray_resources`` (a dict with keys among
    ``num_cpus``, ``num_gpus``, ``memory`` (bytes), ``resources`` (custom ones)), default ``{"num_cpus": 1}``."""
    from specverify.certification.config.run_config import factory_name

    declared = getattr(factory, "ray_resources", None)
    if declared is None:
        return dict(DEFAULT_RESOURCES)
    owner = factory_name(factory)
    check(
        isinstance(declared, dict),
        f"{owner}.ray_resources={declared!r} must be a dict such as {{'num_gpus': 1}} or {{'num_cpus': 2}} "
        "(docs/adapters.md, Ray).",
    )
    unknown = sorted(set(declared) - set(RESOURCE_KEYS))
    check(not unknown, f"{owner}.ray_resources has the keys {unknown!r}; use only {list(RESOURCE_KEYS)}.")
    for key, value in declared.items():
        _resource_value(key, value, owner)
    out = {k: (dict(v) if k == "resources" else v) for k, v in declared.items()}
    out.setdefault("num_cpus", 1)
    return out


def _infrastructure_errors(ray) -> tuple:
    """The exceptions that mean a part's Ray worker (or its node, or its result) was lost, not that it failed."""
    names = ("RayActorError", "WorkerCrashedError", "ObjectLostError", "OwnerDiedError", "NodeDiedError")
    return tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))


def _capacity(ray, resources: dict) -> int:
    """How many engine actors with ``resources`` the cluster can hold at once."""
    have = ray.cluster_resources()
    asked = {"CPU": resources.get("num_cpus", 1), "GPU": resources.get("num_gpus", 0)}
    asked.update(resources.get("resources", {}))
    if resources.get("memory"):
        asked["memory"] = resources["memory"]
    fits = [int(have.get(k, 0) // v) for k, v in asked.items() if v > 0]
    return min(fits) if fits else 1 << 16  # an actor that asks for nothing: no limit from the cluster


@contextlib.contextmanager
def _cluster(ray, address: Optional[str], workers: Optional[int], resources: dict):
    """Connect to ``address``, or start a local cluster on this machine (shut down afterwards); a Ray already
    initialised in this process is used as it is."""
    if ray.is_initialized():
        yield
        return
    if address:
        try:
            ray.init(address=address, log_to_driver=False)
        except ConnectionError as exc:
            raise InvalidArgument(
                f"--ray-address {address!r}: cannot connect to a Ray cluster there ({str(exc).splitlines()[0]}). A "
                "cluster started by `ray start` asks for its token: set RAY_AUTH_MODE=token, with the token in "
                "~/.ray/auth_token or RAY_AUTH_TOKEN (docs/ray.md)."
            ) from None
    else:  # Ray binds the node's own address (it maps 127.0.0.1 there), with its token authentication on
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a local run reports nothing anywhere
        cpus = max(os.cpu_count() or 1, (workers or 1) * max(1, int(resources.get("num_cpus", 1) + 0.999)))
        # address="local": a new instance, even where an earlier `ray start` left its address behind
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


class EngineHost:
    """One engine host (a Ray actor): runs parts of one run with one ``PartWorker``, kept across them."""

    def __init__(self, config, execution, path: str):
        import sys

        if path and os.path.isdir(path):  # the driver's directory: MODULE:ATTR resolves here and in the worker
            os.chdir(path)
            if path not in sys.path:
                sys.path.insert(0, path)
        self.config, self.execution, self.worker = config, execution, None

    def _worker(self):  # noqa: ANN202 - a worker.PartWorker (imported lazily)
        if self.worker is None:
            from specverify.certification.execution.plan import plan
            from specverify.certification.execution.worker import PartWorker

            self.worker = PartWorker(plan(self.config, self.execution), here={})  # which scenarios come: unknown
        return self.worker

    def run(self, part: Part, share: Optional[float], left_s: Optional[float]) -> dict:
        """``{"doc": ...}`` or ``{"error": reason}`` (the run could not be planned here: a set-up failure), with
        this process's pid and the time."""
        from specverify.certification.run.factory import SetupFailure

        started = time.perf_counter()
        try:
            answer = {"doc": self._worker().run(part, share=share, left_s=left_s)}
        except SetupFailure as exc:
            answer = {"error": exc.reason}
        return dict(answer, pid=os.getpid(), elapsed_s=time.perf_counter() - started)

    def allocation(self, configuration: Optional[str], spent_s: float) -> object:
        return self._worker().allocation(configuration, spent_s)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class _Budget:
    """One decoder's budget at the driver: its clock, and its allocation once an actor made it."""

    def __init__(self, config):
        self.seconds, self.started, self.allocation = config.budget_s, time.perf_counter(), None
        self.wanted = config.budget_s is not None or config.max_samples is not None

    def left(self) -> Optional[float]:
        return None if self.seconds is None else self.seconds - (time.perf_counter() - self.started)


class _Schedule:
    """The parts' queue on ``count`` engine actors: each idle actor takes the next part still needed (plan order);
    answers are stored as they arrive; a part whose actor died runs again, first, on a fresh actor; parts a stored
    answer made unneeded are cancelled (a queued one is dropped, a running one's answer is thrown away)."""

    def __init__(self, ray, plan: Plan, store, resources: dict, count: int, report: Callable[[str], None]):
        self.ray, self.plan, self.store, self.report = ray, plan, store, report
        self.host = ray.remote(EngineHost).options(**resources, max_restarts=0, max_task_retries=0)
        self.actors = [self._fresh() for _ in range(count)]
        self.idle, self.running, self.attempts, self.retried, self.cancelled = list(self.actors), {}, {}, 0, 0
        self.budgets: dict = {}
        self.discard: set = set()

    def _fresh(self):
        return self.host.remote(self.plan.config, self.plan.execution, os.getcwd())

    def _budget(self, actor, part: Part) -> _Budget:
        budget = self.budgets.get(part.configuration)
        if budget is None:
            budget = self.budgets[part.configuration] = _Budget(self.plan.run_of(part).config)
            if budget.wanted:
                budget.allocation = self.ray.get(actor.allocation.remote(part.configuration, 0.0))
        return budget

    def _start(self, queue: list) -> None:
        while self.idle and queue:
            actor, part = self.idle[0], queue.pop(0)
            budget = self._budget(actor, part)
            left = budget.left()
            if left is not None and left < 0 and part.scenario != REPRODUCIBILITY:
                self._put(part, _skipped(self.plan, part))
                continue
            share = None
            if budget.allocation is not None and part.scenario != REPRODUCIBILITY:
                share = budget.allocation.fraction(part.scenario)
            self.idle.pop(0)
            self.attempts[part.id] = self.attempts.get(part.id, 0) + 1
            self.running[actor.run.remote(part, share, left)] = (actor, part)

    def _put(self, part: Part, doc: dict) -> None:
        self.store.put(part.id, doc)
        budget = self.budgets.get(part.configuration)
        if budget is not None and budget.allocation is not None and part.scenario != REPRODUCIBILITY:
            budget.allocation.spend(part.scenario, sum(r.get("n") or 0 for r in doc.get("results") or ()))

    def _lost(self, actor, part: Part, exc: BaseException, queue: list) -> None:
        """Run ``part`` again on a fresh actor; once it has failed ``ATTEMPTS`` times, store what lost it."""
        lines = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        self._replace(actor)
        if self.attempts[part.id] >= ATTEMPTS:
            self._put(part, lost_part(self.plan, part, why))
            return
        self.retried += 1
        self.report(f"specverify: ray: {part.label}: its worker was lost ({why}); running it again on a fresh one")
        queue.insert(0, part)

    def _replace(self, actor) -> None:
        """A fresh actor in place of a dead one."""
        with contextlib.suppress(Exception):
            self.ray.kill(actor)
        fresh = self._fresh()
        self.actors.append(fresh)
        self.idle.append(fresh)

    def _prune(self, queue: list) -> None:
        """Drop the queued parts no longer needed, and cancel the running ones."""
        still = {p.id for p in needed(self.plan, self.store.documents())}
        dropped = [p for p in queue if p.id not in still]
        queue[:] = [p for p in queue if p.id in still]
        # a running part is left to end its block (Ray cannot stop a running call of a sync actor; interrupting
        # one mid-call would desynchronise its worker's pipe): its answer is dropped when it comes
        self.discard.update(p.id for _, p in self.running.values() if p.id not in still)
        if dropped:
            self.cancelled += len(dropped)
            self.report(f"specverify: ray: {len(dropped)} parts no longer needed, cancelled")

    def run(self) -> None:
        queue = [p for p in needed(self.plan, self.store.documents()) if self.store.get(p.id) is None]
        total, infra, done = len(queue), _infrastructure_errors(self.ray), 0
        while queue or self.running:
            self._start(queue)
            if not self.running:
                self._prune(queue)
                continue
            [ref], _ = self.ray.wait(list(self.running), num_returns=1)
            actor, part = self.running.pop(ref)
            try:
                answer = self.ray.get(ref)
            except infra as exc:
                if part.id in self.discard:  # not needed any more: only the actor is replaced
                    self._replace(actor)
                    self.cancelled += 1
                else:
                    self._lost(actor, part, exc, queue)
                self._prune(queue)
                continue
            self.idle.append(actor)
            if part.id in self.discard:
                self.cancelled += 1
                continue
            doc = answer.get("doc") or dict(document(self.plan.run_of(part), part), error=answer["error"])
            self._put(part, doc)
            done += 1
            again = f", attempt {self.attempts[part.id]}" if self.attempts[part.id] > 1 else ""
            self.report(
                f"specverify: ray: [{done}/{total}] {part.label} stored, {answer['elapsed_s']:.1f} s "
                f"(worker pid {answer['pid']}{again})"
            )
            self._prune(queue)

    def close(self) -> None:
        """Close the actors' engines (``decoder.close()``), then end the actors."""
        busy = [a for a, _ in self.running.values()]
        closing = [a.shutdown.remote() for a in self.actors if not any(a is b for b in busy)]
        with contextlib.suppress(Exception):
            self.ray.wait(closing, num_returns=len(closing), timeout=60)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)


def _skipped(plan: Plan, part: Part) -> dict:
    run = plan.run_of(part)
    result = ScenarioResult.skipped(run.matrix[part.scenario], NotRun.BUDGET, "not run: budget exhausted")
    return dict(document(run, part), results=[result.to_dict()], elapsed_s=0.0)


def run_on_ray(plan: Plan, store, *, progress: Optional[Callable[[str], None]] = None) -> str:
    """Run the parts of ``plan`` still needed (and not in ``store``) on Ray engine actors into ``store``; the
    executor's description for the certificate (``versions["executor"]``). The execution's ``ray_address``
    connects to a running cluster (``ray start --head``; ``auto``), else a local cluster is started and shut down
    afterwards; a Ray already initialised in this process is used as it is. ``ray_workers`` engine actors (default
    what the cluster holds, at most one per part)."""
    from specverify.certification.run.factory import SetupFailure, resolve_factory

    ray = import_ray()
    report = progress or (lambda line: None)
    try:
        resources = ray_resources_of(resolve_factory(plan.config.factory))
    except InvalidArgument as exc:  # a malformed declaration of the factory: set-up, like bad capabilities
        raise SetupFailure(str(exc)) from None
    execution = plan.execution
    todo = [p for p in needed(plan, store.documents()) if store.get(p.id) is None]
    with _cluster(ray, execution.ray_address, execution.ray_workers, resources):
        room, have = _capacity(ray, resources), ray.cluster_resources()
        check(room >= 1, f"the Ray cluster ({have}) cannot hold one engine actor asking {resources}.")
        count = max(1, min(execution.ray_workers or room, room, len(todo)))
        report(f"specverify: ray {ray.__version__}: {len(todo)} parts on {count} engine actors ({resources})")
        schedule = _Schedule(ray, plan, store, resources, count, report)
        try:
            schedule.run()
        finally:
            schedule.close()
    return (
        f"ray {ray.__version__}: {len(todo)} parts on {count} engine actors, {schedule.retried} retried, "
        f"{schedule.cancelled} cancelled"
    )


def lost_part(plan: Plan, part: Part, why: str) -> dict:
    """The document of a part whose Ray worker died on both attempts. With ``--isolation none`` the decoder ran
    inside that worker: a death while decoding is a protocol violation (``invalid``, DESIGN rule 1). Under
    ``--isolation process`` the decoder's calls ran in a worker process of their own, whose death the part itself
    reports as ``invalid``: the Ray worker's death says nothing about the decoder (``error``)."""
    run = plan.run_of(part)
    scenario = None if part.scenario == REPRODUCIBILITY else part.scenario
    again = run.config.reproduce(scenario=scenario)
    text = f"part {part.label} lost its Ray worker on both attempts ({why})"
    doc = dict(document(run, part), elapsed_s=0.0)
    if run.config.isolation != Isolation.NONE:
        return dict(doc, error=f"{text}; the decoder's calls ran in a worker process of their own, so this says "
                    f"nothing about the decoder: check the cluster, or run it without Ray: {again}")  # fmt: skip
    violation = f"{text}: the decoder ran inside it (--isolation none).\nReproduce: {again}"
    results = [] if scenario is None else [broken_result(run.matrix[scenario], violation, again).to_dict()]
    return dict(doc, violation=violation, results=results)
