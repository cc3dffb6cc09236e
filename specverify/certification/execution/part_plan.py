"""The plan of a run cut into parts (``--block-draws N``): which parts, in which order (``parts.py`` says why).

No decoder is made here: the plan reads the configuration, the matrix and the oracle's laws (a sampling scenario's
planned N, or its sequential design's look schedule).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

from specverify.certification import checks
from specverify.certification.checks.sampling import SamplingCheck
from specverify.certification.checks.scenario import gamma_span
from specverify.certification.config.run_config import RunConfig
from specverify.certification.matrix.laws import law_of
from specverify.certification.run.context import AlphaPlan, Run, matrix_for
from specverify.errors import check

__all__ = ["Part", "REPRODUCIBILITY", "plan_parts", "plan_of", "check_split"]

REPRODUCIBILITY = "(reproducibility)"  # the part that runs the run-level reproducibility check


@dataclass(frozen=True)
class Part:
    """One part of a run: block ``block`` of ``scenario`` (draws ``start`` .. ``start + count - 1``), or the whole
    scenario (``count`` None), or the reproducibility check (``scenario == REPRODUCIBILITY``). ``look`` is the
    sequential look this block ends (None: none, or the fixed plan); ``pair`` names the model pair whose decoder
    runs it (a scheduler keeps parts of one pair on one engine)."""

    scenario: str
    block: int = 0
    start: int = 0
    count: Optional[int] = None
    look: Optional[int] = None
    pair: str = ""

    @property
    def id(self) -> str:
        """``scenario#block``: unique within a run's plan."""
        return f"{self.scenario}#{self.block}"

    def to_dict(self) -> dict:
        return {"id": self.id, "scenario": self.scenario, "block": self.block, "start": self.start,
                "count": self.count, "look": self.look, "pair": self.pair}  # fmt: skip


class _Plan:
    """A run's parts and what the merge needs to decide a split scenario (its law, α plan and look design)."""

    def __init__(self, config: RunConfig, block_draws: int):
        check_split(config, block_draws)
        self.block_draws = block_draws
        from specverify.certification.config.run_config import check_names
        from specverify.certification.matrix.scenarios import run_order
        from specverify.certification.run.factory import resolve_factory

        self.config = replace(config.with_factory_drafts(resolve_factory(config.factory)), shard=None)
        self.matrix = matrix_for(self.config)
        check_names(self.config.scenarios, self.matrix)
        names = self.config.scenarios or tuple(self.matrix)
        self.chosen = [self.matrix[n] for n in names]
        self.alpha = AlphaPlan(config.alpha, config.level.epsilon, config.power, checks.num_tests(self.matrix))
        probe = Run(self.config, self.matrix, self.alpha, session=None)
        order = run_order(self.chosen, gammas=lambda s: gamma_span(probe, s))
        self.designs: dict = {}
        self.parts: list = []
        for scenario in order:
            self.parts += self._blocks(scenario)
        self.parts.append(Part(REPRODUCIBILITY, pair=str(self.chosen[0].pair) if self.chosen else ""))
        self.by_id = {p.id: p for p in self.parts}
        self.blocks: dict = {}  # scenario -> its parts (blocks_of)
        self.states: dict = {}  # scenario -> what part_merge last read of its blocks
        self.checked: dict = {}  # id(document) -> (document, part id): part_merge checked it

    def split(self, scenario) -> bool:
        return isinstance(checks.check_for(scenario, self.config, self.matrix), SamplingCheck)

    def _blocks(self, scenario) -> list:
        pair = str(scenario.pair)
        if not self.split(scenario):
            return [Part(scenario.name, pair=pair)]
        law = law_of(scenario)
        if self.config.sequential:
            from specverify.stats import plan_sequential

            plan = self.alpha
            design = plan_sequential(law.probs, plan.epsilon, alpha=plan.alpha_test, power=plan.power)
            ends, self.designs[scenario.name] = list(design.schedule), design
        else:
            ends = [self.alpha.sample_size(law)]
        out, begin, size = [], 0, self.block_draws
        for look, end in enumerate(ends):
            for start in range(begin, end, size):
                count = min(size, end - start)
                last = start + count == end
                out.append(
                    Part(scenario.name, len(out), start, count, look if last and self.config.sequential else None, pair)
                )
            begin = end
        return out

    def blocks_of(self, name: str) -> list:
        """``name``'s parts in block index order."""
        return self.blocks.setdefault(name, [p for p in self.parts if p.scenario == name])


@lru_cache(maxsize=8)
def _plan(config: RunConfig, block_draws: int) -> _Plan:
    return _Plan(config, block_draws)


def plan_of(config: RunConfig, block_draws: int) -> _Plan:
    try:
        return _plan(config, block_draws)
    except TypeError:  # a callable factory that cannot be hashed
        return _Plan(config, block_draws)


def plan_parts(config: RunConfig, *, block_draws: int) -> list:
    """Every :class:`Part` of the run ``config`` cut into blocks of ``block_draws`` draws, in plan order."""
    return list(plan_of(config, block_draws).parts)


def check_split(config: RunConfig, block_draws: object) -> None:
    """``InvalidArgument`` unless ``config`` can be cut into blocks of ``block_draws`` (an int >= 1) draws."""
    check(isinstance(config, RunConfig), f"config={config!r} must be a RunConfig (RunConfig.create(...)).")
    check(
        isinstance(block_draws, int) and not isinstance(block_draws, bool) and block_draws >= 1,
        f"block_draws={block_draws!r} must be an int >= 1 (draws per block), e.g. 65536.",
    )
    clashing = [n for n in ("budget_s", "max_samples", "against", "target_dir") if getattr(config, n)]
    check(
        not clashing,
        f"block_draws={block_draws!r} cannot be used with {', '.join(clashing)}: a budget is shared out within one "
        "process, and two-sample scenarios draw from two decoders. Leave block_draws out (--block-draws).",
    )
