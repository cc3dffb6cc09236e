"""The zoo: known-broken (and known-exact) speculative decoders, one per bug mechanism (placeholder)."""

from __future__ import annotations

from specverify.zoo import controls, processors, rule, state
from specverify.zoo._registry import VERDICTS, ZooEntry, registered
from specverify.zoo.controls import *  # noqa: F401,F403
from specverify.zoo.processors import *  # noqa: F401,F403
from specverify.zoo.rule import *  # noqa: F401,F403
from specverify.zoo.scenarios import SCENARIOS, Scenario
from specverify.zoo.state import *  # noqa: F401,F403

ZOO: dict = registered()


def zoo_entries() -> list:
    return list(ZOO.values())
