"""``--executor ray``: a certification's parts as Ray tasks on engine actors, merged as they arrive (docs/ray.md).

The run is cut into the parts of ``parts.py`` — a sampling scenario's draws in blocks, every other scenario whole,
the reproducibility check — which change no count: a block's draws depend only on (seed, scenario, block), so the
merged certificate has the unsplit run's verdict and seeded counts, and its command (``--block-draws N``) reruns it
without Ray. Each actor is one engine host: it keeps its ``PartWorker`` (its runner: the worker process, or the
in-process host under ``--isolation none``, and its decoders) from one part to the next, since engines are slow to
start, and asks for the resources the factory declares (``factory.ray_resources``). Answers are merged as they
arrive; under sequential looks the merge reads a scenario's blocks in index order, and the parts a decision made
unneeded are cancelled. A part whose actor dies runs again from its start on a fresh actor (the same counts); a
part lost twice ends the run by DESIGN rule 1 (``ray_units.lost_part``).

Ray is imported only here, and only when a run asks for it (the ``ray`` extra).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from typing import Callable, Optional, Sequence

from specverify.certification.config.run_config import RunConfig, factory_name
from specverify.certification.results.evidence import Certificate
from specverify.enums import Verdict
from specverify.errors import InvalidArgument, check

__all__ = [
    "DISTRIBUTION",
    "RayMissing",
    "import_ray",
    "ray_resources_of",
    "run_on_ray",
]

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


class _Schedule:
    """The parts' queue on ``count`` engine actors: each idle actor takes the next part still needed (plan order);
    answers are merged as they arrive; a part whose actor died runs again, first, on a fresh actor; parts a merged
    answer made unneeded are cancelled (a queued one is dropped, a running one's answer is thrown away)."""

    def __init__(self, ray, units, resources: dict, count: int, report: Callable[[str], None]):
        from specverify.certification.execution.ray_units import EngineHost

        self.ray, self.units, self.report = ray, units, report
        self.host = ray.remote(EngineHost).options(**resources, max_restarts=0, max_task_retries=0)
        self.actors = [self._fresh() for _ in range(count)]
        self.idle, self.running, self.attempts, self.retried, self.cancelled = list(self.actors), {}, {}, 0, 0

    def _fresh(self):
        return self.host.remote(self.units, os.getcwd())

    def _start(self, queue: list) -> None:
        while self.idle and queue:
            actor, part = self.idle.pop(0), queue.pop(0)
            key = self.units.key(part)
            self.attempts[key] = self.attempts.get(key, 0) + 1
            self.running[actor.run.remote(part)] = (actor, part)

    def _lost(self, actor, part, exc: BaseException, queue: list) -> Optional[str]:
        """Run ``part`` again on a fresh actor; what lost it, once it has failed ``ATTEMPTS`` times."""
        lines = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        if self.attempts[self.units.key(part)] >= ATTEMPTS:
            return why
        self.retried += 1
        label = self.units.label(part)
        self.report(f"specverify: ray: {label}: its worker was lost ({why}); running it again on a fresh one")
        queue.insert(0, part)
        self._replace(actor)
        return None

    def _replace(self, actor) -> None:
        """A fresh actor in place of a dead one."""
        with contextlib.suppress(Exception):
            self.ray.kill(actor)
        fresh = self._fresh()
        self.actors.append(fresh)
        self.idle.append(fresh)

    def _prune(self, queue: list, docs: list) -> None:
        """Drop the queued parts no longer needed, and cancel the running ones."""
        needed, key = self.units.needed(docs), self.units.key
        dropped = [p for p in queue if key(p) not in needed]
        queue[:] = [p for p in queue if key(p) in needed]
        # a running part is left to end its block (Ray cannot stop a running call of a sync actor; interrupting
        # one mid-call would desynchronise its worker's pipe): its answer is dropped when it comes
        self.discard.update(key(p) for _, p in self.running.values() if key(p) not in needed)
        if dropped:
            self.cancelled += len(dropped)
            self.report(f"specverify: ray: {len(dropped)} parts no longer needed, cancelled")

    def run(self, parts: Sequence) -> tuple:
        """``(docs, lost, error)``: the parts' documents in arrival order; the part lost twice with why, or the
        set-up failure a part met (the rest is cancelled)."""
        queue, docs, infra, self.discard = list(parts), [], _infrastructure_errors(self.ray), set()
        while queue or self.running:
            self._start(queue)
            [ref], _ = self.ray.wait(list(self.running), num_returns=1)
            actor, part = self.running.pop(ref)
            try:
                answer = self.ray.get(ref)
            except infra as exc:
                if self.units.key(part) in self.discard:  # not needed any more: only the actor is replaced
                    self._replace(actor)
                    self.cancelled += 1
                    continue
                why = self._lost(actor, part, exc, queue)
                if why is not None:
                    return docs, (part, why), None
                continue
            self.idle.append(actor)
            key = self.units.key(part)
            if key in self.discard:
                self.cancelled += 1
                continue
            if "error" in answer:
                return docs, None, answer["error"]
            docs.append(answer["doc"])
            again = f", attempt {self.attempts[key]}" if self.attempts[key] > 1 else ""
            self.report(
                f"specverify: ray: [{len(docs)}/{len(parts)}] {self.units.label(part)} merged, "
                f"{answer['elapsed_s']:.1f} s (worker pid {answer['pid']}{again})"
            )
            self._prune(queue, docs)
        return docs, None, None

    def close(self) -> None:
        """Close the actors' engines (``decoder.close()``), then end the actors."""
        busy = [a for a, _ in self.running.values()]
        closing = [a.shutdown.remote() for a in self.actors if not any(a is b for b in busy)]
        with contextlib.suppress(Exception):
            self.ray.wait(closing, num_returns=len(closing), timeout=60)
        for actor in self.actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)


def _check_ray_config(config: RunConfig, block_draws: int) -> None:
    """What ``--executor ray`` cannot run, refused before a cluster is started."""
    from specverify.certification.execution.parts import check_split

    check(config.shard is None, f"--shard {config.shard!r} with --executor ray: the executor splits the run itself.")
    check(
        config.budget_s is None and config.max_samples is None,
        "--budget / --max-samples with --executor ray: a budget is shared out within one process, which the "
        "run's parts cannot see; run a budgeted certification with --executor local.",
    )
    check_split(config, block_draws)  # two-sample runs (--against, a user's checkpoints) are not split


def run_on_ray(
    config: RunConfig,
    *,
    address: Optional[str] = None,
    workers: Optional[int] = None,
    block_draws: Optional[int] = None,
    progress: Optional[Callable[[str], None]] = None,
) -> Certificate:
    """Certify ``config`` on Ray: its parts (``parts.py``, blocks of ``block_draws`` draws, default
    ``DEFAULT_BLOCK_DRAWS``) as tasks on engine actors (``workers`` of them, default what the cluster holds, at most
    one per part), merged into the verdict and seeded counts the same run gives without Ray (docs/ray.md).

    ``address`` connects to a running cluster (``ray start --head``; ``auto``); without it a local cluster is
    started and shut down afterwards; a Ray already initialised in this process is used as it is. The
    certificate's ``versions["executor"]`` records the executor; its ``command`` runs without Ray."""
    from specverify.certification.execution.ray_units import DEFAULT_BLOCK_DRAWS

    ray = import_ray()
    check(
        address is None or (isinstance(address, str) and address.strip() != ""),
        f"address={address!r} must be a Ray address such as 'auto' or 'HOST:6379', or None (a local cluster).",
    )
    check(
        workers is None or (type(workers) is int and workers >= 1),
        f"workers={workers!r} must be an int >= 1 (engine actors), or None (as many as the cluster holds).",
    )
    check(isinstance(config, RunConfig), f"config={config!r} must be a RunConfig (RunConfig.create(...)).")
    block_draws = DEFAULT_BLOCK_DRAWS if block_draws is None else block_draws
    from specverify.certification.results.verdict import error_certificate
    from specverify.certification.run.factory import SetupFailure, resolve_factory

    try:
        factory = resolve_factory(config.factory)
    except SetupFailure as exc:
        return error_certificate(exc.reason, config=config, elapsed_s=0.0)
    config = config.with_factory_drafts(factory)
    try:
        resources = ray_resources_of(factory)
    except InvalidArgument as exc:  # a malformed declaration of the factory: set-up, like bad capabilities
        return error_certificate(str(exc), config=config, elapsed_s=0.0)
    _check_ray_config(config, block_draws)
    return _run(ray, config, block_draws, resources, address, workers, progress or (lambda line: None))


def _run(ray, config, block_draws, resources, address, workers, report) -> Certificate:
    from specverify.certification.execution.part_plan import REPRODUCIBILITY
    from specverify.certification.execution.ray_units import PartUnits, lost_part
    from specverify.certification.results.verdict import error_certificate

    started, units = time.perf_counter(), PartUnits(config, block_draws)
    with _cluster(ray, address, workers, resources):
        room, have = _capacity(ray, resources), ray.cluster_resources()
        check(room >= 1, f"the Ray cluster ({have}) cannot hold one engine actor asking {resources}.")
        count = min(workers or room, room, len(units.parts))
        report(f"specverify: ray {ray.__version__}: {len(units.parts)} parts on {count} engine actors ({resources})")
        schedule = _Schedule(ray, units, resources, count, report)
        try:
            docs, lost, error = schedule.run(units.parts)
        finally:
            schedule.close()
    elapsed = time.perf_counter() - started
    if error is not None:
        return error_certificate(error.removeprefix("set-up failed: "), config=config, elapsed_s=elapsed)
    if lost is not None:
        part, why = lost
        scenario = None if part.scenario == REPRODUCIBILITY else part.scenario
        verdict, text = lost_part(config, units.label(part), scenario, why)
        if verdict == Verdict.ERROR:
            return replace(error_certificate(text, config=config, elapsed_s=elapsed), reason=text)
        lost = (part, text)
    cert = replace(units.merge(docs, lost=lost), elapsed_s=elapsed)
    executor = (
        f"ray {ray.__version__}: {len(units.parts)} parts on {count} engine actors, {schedule.retried} retried, "
        f"{schedule.cancelled} cancelled"
    )
    return replace(cert, versions={**cert.versions, "executor": executor})
