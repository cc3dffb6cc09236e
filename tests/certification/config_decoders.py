"""Factories with engine configurations (tests/certification/test_engine_configs.py): the reference decoder behind
a wrapper whose ``engine_info`` reports how many prompt tokens it "found cached" (an option, so a configuration can
reach its state or not), and a configuration that cannot run here."""

from specverify.protocol import EngineConfig
from specverify.reference import make_decoder


class _Configured:
    def __init__(self, inner, cached_tokens, label):
        self._inner = inner
        self.engine_info = {"name": "toy-engine", "requested": {"label": label},
                            "state": {"cached_tokens": cached_tokens}}  # fmt: skip

    def __call__(self, requests):
        return self._inner(requests)

    def __getattr__(self, name):  # capabilities, sample, draft_law ...: the reference's own
        return getattr(self._inner, name)


def configured(target, draft, *, cached_tokens=0, label="default"):
    return _Configured(make_decoder(target, draft), cached_tokens, label)


configured.engine_configs = {
    "default": {},
    "warm-cache": EngineConfig(options={"cached_tokens": 40, "label": "warm"}, doc="prefix hits",
                               reaches={"cached_tokens": 33}),
    "cold-cache": EngineConfig(options={"cached_tokens": 0, "label": "cold"}, doc="no prefix hits",
                               reaches={"cached_tokens": 33}),
    "async": EngineConfig(options={"label": "async"}, unreachable="async scheduling is GPU-only"),
}  # fmt: skip
configured.default_engine_config = "default"


def no_configs(target, draft):
    return make_decoder(target, draft)


def bad_default(target, draft):
    return make_decoder(target, draft)


bad_default.engine_configs = {"a": {}}
bad_default.default_engine_config = "b"


def with_scenarios(target, draft, *, cached_tokens=0, label="default"):
    return _Configured(make_decoder(target, draft), cached_tokens, label)


with_scenarios.engine_configs = {
    "turns": EngineConfig(options={"cached_tokens": 32, "label": "turns"}, doc="the configuration scenarios",
                          reaches={"cached_tokens": 1}, scenarios=("second-block", "long-prompt", "multi-turn")),
    "bare": EngineConfig(options={}, doc="no scenarios of its own"),
}  # fmt: skip
