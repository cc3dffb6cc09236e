"""Result objects of a certification: per-scenario evidence and the certificate."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Optional

from specverify.enums import Level, NotRun, ScenarioKind, Verdict
from specverify.errors import InvalidArgument

__all__ = ["ScenarioResult", "Certificate"]


@dataclass(frozen=True)
class ScenarioResult:
    """Evidence for one scenario, or for one ``member`` of it (a mixed batch's configurations, a batch
    composition's ``small`` / ``alone`` / ``large``): ``name`` reads ``scenario/member`` then. ``passed`` is None
    when it was not run: ``not_run`` says why (typed, what the verdict reads) and ``note`` in words.

    Sampling scenarios carry ``n`` (draws), ``planned_n``, the omnibus ``statistic``/``df``, the scenario
    ``pvalue`` (Bonferroni over the battery), ``detectable_tv`` at that n, ``tv_estimate`` with its
    ``tv_interval`` beside ``tv_null_quantile`` (the TV an exact decoder shows at this n, 95 %), the ``worst``
    outcomes decoded to text, and ``impossible`` outcomes (exact probability 0: an immediate failure).
    """

    scenario: str
    kind: ScenarioKind
    exercises: str
    covered: bool
    passed: Optional[bool] = None
    note: str = ""
    n: int = 0
    planned_n: int = 0
    statistic: Optional[float] = None
    df: Optional[int] = None
    pvalue: Optional[float] = None
    tests: tuple = ()
    detectable_tv: Optional[float] = None
    tv_estimate: Optional[float] = None
    tv_interval: Optional[tuple] = None
    tv_null_quantile: Optional[float] = None
    worst: tuple = ()
    impossible: tuple = ()
    mismatches: tuple = ()
    violation: Optional[str] = None
    accepted_observed: Optional[dict] = None
    accepted_expected: Optional[tuple] = None
    accepted_pvalue: Optional[float] = None
    metrics: Optional[dict] = None  # the all-round acceptance check (certification/metrics_check.py)
    counters: Optional[dict] = None  # the engine's own counters' identities (certification/counters_check.py)
    num_outcomes: int = 0
    reproduce: str = ""
    elapsed_s: float = 0.0
    member: Optional[str] = None
    not_run: Optional[NotRun] = None

    @property
    def name(self) -> str:
        """``scenario``, or ``scenario/member`` for a member's result (the name the reports and JSON show)."""
        return self.scenario if self.member is None else f"{self.scenario}/{self.member}"

    @classmethod
    def skipped(
        cls, scenario, why: NotRun, note: str, *, member: Optional[str] = None, planned_n: int = 0
    ) -> ScenarioResult:
        """The result of a scenario (or member) that gathered no evidence, for the typed reason ``why``."""
        return cls(
            scenario.name, scenario.kind, scenario.exercises, covered=False, note=note, member=member,
            not_run=why, planned_n=planned_n,
        )  # fmt: skip

    def to_dict(self) -> dict:
        return {"name": self.name, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> ScenarioResult:
        """The inverse of :meth:`to_dict` after a JSON round trip (lists back to tuples, count keys to ints)."""
        known = {f.name for f in fields(cls)} | {"name"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArgument(f"scenario result keys {unknown!r} are unknown: written by another version?")
        out = dict(data)
        out.pop("name", None)
        out["kind"] = ScenarioKind(out["kind"])
        out["not_run"] = None if out.get("not_run") is None else NotRun(out["not_run"])
        for key in ("tests", "worst", "impossible", "mismatches", "tv_interval", "accepted_expected"):
            if out.get(key) is not None:
                out[key] = tuple(tuple(x) if isinstance(x, list) else x for x in out[key])
        if out.get("accepted_observed") is not None:
            out["accepted_observed"] = {int(k): int(v) for k, v in out["accepted_observed"].items()}
        return cls(**out)


@dataclass(frozen=True)
class Certificate:
    """The verdict with its evidence. ``meets(require)`` says whether the decoder reaches ``require``."""

    verdict: Verdict
    reason: str
    level: Level
    seed: int
    alpha: float
    epsilon: float
    elapsed_s: float
    version: str
    factory: str
    scenarios: tuple
    reproducible: Optional[bool] = None
    reproducibility_note: str = ""
    speculation_observed: Optional[bool] = None
    versions: dict = field(default_factory=dict)
    command: str = ""
    shard_info: Optional[dict] = None  # a shard's counts file (certify(..., shard=...)); None for a whole run
    metrics_ok: Optional[bool] = None  # the named check ``metrics`` (docs/metrics.md); None: not checked
    metrics_note: str = ""
    timings: Optional[dict] = None  # the decoder's optional per-phase milliseconds (decoder.timings())
    config: Optional[object] = None  # the RunConfig it ran (None: a v1 document without one)
    engine: Optional[dict] = None  # the decoder's optional ``engine`` description (name, version, configuration)
    counters_ok: Optional[bool] = None  # the named check ``counters`` (docs/metrics.md); None: no hook, not checked
    counters_note: str = ""

    def meets(
        self,
        require: Verdict | str = Verdict.EXACT,
        *,
        require_reproducible: bool = False,
        require_metrics: bool = False,
    ) -> bool:
        """Whether the verdict is at least ``require`` (exact > greedy-only > approximate > invalid); inconclusive
        and error meet nothing. ``require_reproducible`` / ``require_metrics``: the named check must also have
        passed (not merely not failed); ``require_metrics`` also fails on a broken counter identity (``counters``
        False; None, no ``reported_metrics()`` hook, is no failure: the hook is optional)."""
        require = Verdict.parse(require, "require")
        if require.rank < 0:
            raise InvalidArgument(
                f"require={str(require)!r} is not a decoder verdict; use one of "
                f"{[str(v) for v in Verdict.decoder_verdicts()]}."
            )
        if require_reproducible and self.reproducible is not True:
            return False
        if require_metrics and (self.metrics_ok is not True or self.counters_ok is False):
            return False
        verdict = Verdict(self.verdict)
        return verdict.rank >= require.rank

    @property
    def failed_checks(self) -> tuple:
        """The named checks beside the verdict that failed: ``reproducible``, ``metrics``, ``counters``."""
        named = (("reproducible", self.reproducible), ("metrics", self.metrics_ok), ("counters", self.counters_ok))
        return tuple(n for n, ok in named if ok is False)

    @property
    def failures(self) -> tuple:
        return tuple(s for s in self.scenarios if s.passed is False)

    def requirements(self) -> dict:
        """What the run required (``RunConfig.require*``) and whether each held; ``met`` is the exit code's answer.

        Keys: ``require`` (the verdict needed) with ``verdict_meets``, then ``reproducible``, ``metrics``,
        ``speculation`` and ``counters``, each ``{"required": bool, "ok": bool | None}`` (``ok`` None: not checked).
        ``counters`` is required with ``metrics`` and holds unless an identity broke (no hook: None, still met)."""
        cfg = self.config
        require = Verdict.EXACT if cfg is None else cfg.require
        needed = {
            "reproducible": (bool(cfg and cfg.require_reproducible), self.reproducible),
            "metrics": (bool(cfg and cfg.require_metrics), self.metrics_ok),
            "speculation": (bool(cfg and cfg.require_speculation), self.speculation_observed),
        }
        meets = self.verdict != Verdict.ERROR and self.meets(require)
        out = {"require": str(require), "verdict_meets": meets}
        out.update({k: {"required": req, "ok": ok} for k, (req, ok) in needed.items()})
        out["counters"] = {"required": needed["metrics"][0], "ok": self.counters_ok}
        counters_hold = not (needed["metrics"][0] and self.counters_ok is False)
        out["met"] = meets and counters_hold and all(ok is True for req, ok in needed.values() if req)
        return out

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["scenarios"] = [s.to_dict() for s in self.scenarios]
        out["config"] = None if self.config is None else self.config.to_dict()
        return out
