"""The matrix an engine configuration runs: the family's scenarios with those its ``EngineConfig.scenarios`` adds
(the checkpoint family's configuration scenarios, ``matrix_checkpoint.CONFIGURATION_SCENARIOS``), appended after the
family's own so every scenario keeps its place and the α plan's m counts the added ones. ``run.matrix_for`` and
``RunConfig``'s name check call it."""

from __future__ import annotations

from typing import Iterable

from specverify.certification.matrix.scenarios import SCENARIOS, Matrix
from specverify.enums import ModelFamily
from specverify.errors import InvalidArgument, check

__all__ = ["configured_matrix", "engine_config_matrix", "configuration_scenario_names"]


def configured_matrix(
    family: Matrix, names: Iterable[str], models: str = ModelFamily.TOY, pairs: str | None = None
) -> Matrix:
    """``family`` (a matrix of ``models``, the checkpoint pair set ``pairs``) with the configuration scenarios
    ``names`` (``EngineConfig.scenarios``) appended in their own order after its scenarios, so every scenario of
    ``family`` keeps its place (shards) and the α plan's m counts the added ones. A name already in ``family`` adds
    nothing (the toy matrix holds ``long-prompt`` and ``multi-turn``); the checkpoint family's are
    ``matrix_checkpoint.CONFIGURATION_SCENARIOS``."""
    names = tuple(names)
    check(isinstance(family, Matrix), f"family={family!r} must be a Matrix (scenarios.matrix(...)).")
    missing = tuple(n for n in names if n not in family)
    if not missing:
        return family
    models = ModelFamily.parse(models, "models")
    offered: dict = {}
    if models == ModelFamily.CHECKPOINT and family.exact_law and not family.label:
        from specverify.certification.matrix.checkpoint import DEFAULT_PAIR_SET, configuration_scenarios

        offered = configuration_scenarios(SCENARIOS, pairs or DEFAULT_PAIR_SET)
    unknown = [n for n in missing if n not in offered]
    if unknown:
        raise InvalidArgument(
            f"scenarios={unknown!r} of an engine configuration are not scenarios of this matrix nor configuration "
            f"scenarios of models={str(models)!r}: those are {sorted(offered) or 'none'} (EngineConfig.scenarios)."
        )
    key = (id(family), missing)
    if key not in _CONFIGURED or _CONFIGURED[key][0] is not family:
        extra = {n: offered[n] for n in offered if n in missing}  # the offered order: turn 1 before turn 2
        _CONFIGURED[key] = (family, Matrix({**dict(family.items()), **extra}, label=family.label))
    return _CONFIGURED[key][1]


def engine_config_matrix(family: Matrix, factory: object, engine_config: str | None, models, pairs=None) -> Matrix:
    """The matrix a run with ``engine_config`` (a name of ``factory.engine_configs``; None: none) runs: ``family``
    with that configuration's ``scenarios`` (:func:`configured_matrix`). The hook ``run.matrix_for`` calls."""
    if engine_config is None:
        return family
    from specverify.protocol import engine_configs_of

    presets, _ = engine_configs_of(factory)
    preset = presets.get(engine_config)
    if preset is None:  # factory_options names the configurations when the decoder is made
        return family
    return configured_matrix(family, preset.scenarios, models, pairs)


_CONFIGURED: dict = {}


def configuration_scenario_names(models: str = ModelFamily.TOY) -> tuple:
    """The names an engine configuration may add to the matrix of ``models`` (``EngineConfig.scenarios``): what
    ``RunConfig`` accepts in ``scenarios`` beside the default matrix's when an ``engine_config`` is given (the
    configured matrix checks them again once built)."""
    if ModelFamily.parse(models, "models") != ModelFamily.CHECKPOINT:
        return ()
    from specverify.certification.matrix.checkpoint import CONFIGURATION_SCENARIOS

    return CONFIGURATION_SCENARIOS
