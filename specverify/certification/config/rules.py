"""The one table of option combinations that have no meaning, each with the reason a user reads.

``RunConfig`` checks the rows about its own fields when it is built, ``Execution`` its own, and
``execution.create_run`` the rows that tie the two; a row names its options as ``{name}``, so each surface spells
them its way (``--block-draws`` on the command line, ``block_draws`` in Python). Everything not in this table
combines: Ray with ``--resume``, a budget or several engine configurations; parts (``--block-draws``) with
``--against``; shards of a draft family's matrix or of a user's checkpoints.

>>> [rule.names for rule in RULES][:2]
[('drafts', 'models'), ('target_dir', 'draft_dir', 'against')]
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from specverify.certification.config.options import OPTIONS_BY_NAME, OptionError
from specverify.enums import DraftFamily, ModelFamily

__all__ = ["Rule", "RULES", "check_rules"]


class Rule(NamedTuple):
    """``names`` the options the row ties; ``refuses(config, execution)`` True when the combination is given;
    ``why`` the message (``{name}`` spelled per surface, ``{value}`` the first option's value); ``surfaces`` where
    it applies (None: everywhere)."""

    names: tuple
    refuses: Callable
    why: str
    surfaces: Optional[tuple] = None


def _family(config) -> bool:
    return config.drafts not in (None, DraftFamily.AR)


_BUDGET = (
    "a budget is shared out between scenarios as they end, while blocks are cut from a scenario's planned N "
    "before it starts: give one or the other"
)
RULES = (
    Rule(("drafts", "models"), lambda c, e: _family(c) and c.models != ModelFamily.TOY,
         "{drafts} runs on the toy models only; leave {models} at 'toy'."),
    Rule(("target_dir", "draft_dir", "against"),
         lambda c, e: bool(c.target_dir or c.draft_dir) and not (c.target_dir and c.draft_dir and c.against),
         "{target_dir} and {draft_dir} go together, with {against} (e.g. plain): a user's checkpoints have no exact "
         "law."),
    Rule(("control", "against"), lambda c, e: bool(c.control and (c.against or c.target_dir)),
         "{control} cannot be used with {against} or a user's checkpoints: the control decides whether the run "
         "falls back to the two-sample comparison itself."),
    Rule(("control", "shard"), lambda c, e: bool(c.control) and e is not None and e.shard is not None,
         "{control} cannot be used with {shard}: the control decides how every shard runs; run the control's "
         "decoder first and shard with --against where it failed."),
        Rule(("budget_s", "target_dir"), lambda c, e: bool(c.target_dir and c.budget_s),
         "{budget_s} cannot be used with {target_dir}: a user pair's sample sizes come from a pilot of the plain "
         "path, and its two-sample tests run their whole plan."),
    Rule(("models", "target_dir"), lambda c, e: bool(c.target_dir) and c.models != ModelFamily.TOY,
         "{models} cannot be used with {target_dir}: the user's checkpoints are the models."),
    Rule(("drafts", "target_dir"), lambda c, e: bool(c.target_dir) and _family(c),
         "{drafts} cannot be used with {target_dir}: a user pair runs the AR two-sample matrix."),
    Rule(("block_draws", "budget_s"), lambda c, e: e.block_draws is not None and c.budget_s is not None,
         "{block_draws}={value} cannot be used with {budget_s}: " + _BUDGET + "."),
    Rule(("block_draws", "max_samples"), lambda c, e: e.block_draws is not None and c.max_samples is not None,
         "{block_draws}={value} cannot be used with {max_samples}: " + _BUDGET + "."),
    Rule(("shard", "executor"), lambda c, e: e.shard is not None and e.executor == "ray",
         "{shard}={value} with {executor} ray: the Ray executor splits the run itself; run the shards with "
         "{executor} local."),
    Rule(("ray_address", "executor"), lambda c, e: e.ray_address is not None and e.executor != "ray",
         "{ray_address}={value} needs {executor} ray (the default executor is local)."),
    Rule(("ray_workers", "executor"), lambda c, e: e.ray_workers is not None and e.executor != "ray",
         "{ray_workers}={value} needs {executor} ray (the default executor is local)."),
    Rule(("counts_out", "shard"), lambda c, e: e.counts_out is not None and e.shard is None,
         "{counts_out}={value} needs {shard} I/N: a whole run's certificate is written with --json."),
    Rule(("shard", "counts_out"), lambda c, e: e.shard is not None and e.counts_out is None,
         "{shard}={value} needs {counts_out} PATH: a shard's evidence is its counts file (merge them).",
         surfaces=("cli",)),
    Rule(("engine_config", "engine_configs"), lambda c, e: c.engine_config is not None and bool(e.engine_configs),
         "{engine_config}={value} together with {engine_configs}: give the configurations in one list."),
)  # fmt: skip


def check_rules(config, execution, *, owners: tuple, surface: Optional[str] = None) -> None:
    """``OptionError`` for the first row of :data:`RULES` whose options all belong to ``owners`` (``("run",)``,
    ``("execution",)`` or both) and that refuses ``config`` with ``execution`` (either may be None where no row of
    ``owners`` reads it). With both owners only the rows that tie the two are checked (each dataclass checked its
    own when it was built), and the rows of ``surface`` (a row with ``surfaces`` applies only there)."""
    for rule in RULES:
        belongs = {OPTIONS_BY_NAME[n].owner for n in rule.names}
        if not belongs <= set(owners):
            continue
        if rule.surfaces is not None:
            if surface not in rule.surfaces:
                continue
        elif len(owners) > 1 and len(belongs) == 1:
            continue  # checked when its own dataclass was built
        if rule.refuses(config, execution):
            source = execution if OPTIONS_BY_NAME[rule.names[0]].owner == "execution" else config
            raise OptionError(rule.why, getattr(source, rule.names[0]))
