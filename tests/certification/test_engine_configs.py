"""Engine configurations (``--engine-config NAME``, repeatable or ``all``): each certified as its own decoder, a
configuration whose state was not reached is not covered (never a pass), the set's exit code is the worst's, and
its JSON document holds one certificate per configuration (docs/adapters.md, "Engine configurations")."""

import json

import pytest

import specverify as sv
from specverify.certification import CORE
from specverify.certification.execution.certify import certify_configurations
from specverify.cli import ExitCode
from specverify.errors import InvalidArgument
from specverify.protocol import EngineConfig, engine_of
from specverify.report import validate_document
from tests.extras import needs_hf
from tests.helpers import cli

F = "tests.certification.config_decoders"
QUICK = dict(level="quick", isolation="none", scenarios=list(CORE))


@pytest.fixture(scope="module")
def warm_and_cold():
    return certify_configurations(f"{F}:configured", ["warm-cache", "cold-cache"], **QUICK)


def test_each_configuration_is_its_own_run_and_an_unreached_state_is_not_covered(warm_and_cold):
    warm, cold = warm_and_cold.results
    assert [warm.name, cold.name] == ["warm-cache", "cold-cache"]
    for r in (warm, cold):
        assert r.certificate.verdict == "exact" and r.certificate.config.engine_config == r.name
        assert f"--engine-config {r.name}" in r.certificate.command
        assert r.certificate.engine["requested"]["label"] == r.preset.options["label"]  # its options reached it
    assert warm.covered is True and warm.met and "cached_tokens = 40" in warm.note
    assert cold.covered is False and not cold.met and "cached_tokens = 0 (needs >= 33)" in cold.note
    assert warm_and_cold.verdict == "exact" and not warm_and_cold.met  # exact law, yet not a pass


def test_all_lists_an_unreachable_configuration_and_never_runs_it():
    cs = certify_configurations(f"{F}:configured", ["all"], **QUICK)
    assert [r.name for r in cs.results] == ["default", "warm-cache", "cold-cache", "async"]
    unreachable = cs.results[-1]
    assert unreachable.certificate is None and unreachable.covered is None and "GPU-only" in unreachable.note
    assert cs.default == "default" and not cs.met  # cold-cache is not covered
    named = certify_configurations(f"{F}:configured", ["default", "async"], **QUICK)
    assert named.results[1].covered is False and not named.met  # named on its own: not covered
    assert certify_configurations(f"{F}:configured", ["default", "warm-cache"], **QUICK).met


def test_bad_names_and_declarations_are_usage_errors():
    with pytest.raises(InvalidArgument, match="is not a configuration of .* it names"):
        certify_configurations(f"{F}:configured", ["warm"], **QUICK)
    with pytest.raises(InvalidArgument, match="named twice"):
        certify_configurations(f"{F}:configured", ["default", "default"], **QUICK)
    with pytest.raises(InvalidArgument, match="declares no engine configurations"):
        certify_configurations(f"{F}:no_configs", ["all"], **QUICK)
    with pytest.raises(InvalidArgument, match="default_engine_config='b' must name one of"):
        certify_configurations(f"{F}:bad_default", ["a"], **QUICK)
    with pytest.raises(InvalidArgument, match="non-empty list"):
        certify_configurations(f"{F}:configured", "default", **QUICK)
    with pytest.raises(InvalidArgument, match="cannot run here: async scheduling is GPU-only"):
        sv.certify(f"{F}:configured", engine_config="async", **QUICK)
    with pytest.raises(InvalidArgument, match="reaches="):
        EngineConfig(reaches={"cached_tokens": -1})
    with pytest.raises(InvalidArgument, match="unreachable="):
        EngineConfig(unreachable="  ")


def test_engine_info_state_must_hold_counts():
    class D:
        engine_info = {"name": "x", "state": {"preemptions": "many"}}

    with pytest.raises(InvalidArgument, match="'state'"):
        engine_of(D())
    D.engine_info = {"name": "x", "state": {"preemptions": 3}}
    assert engine_of(D())["state"] == {"preemptions": 3}


def test_the_cli_writes_one_document_per_set_and_exits_with_the_worst(tmp_path):
    path = tmp_path / "set.json"
    flags = ["--level", "quick", "--isolation", "none", *(f for s in CORE for f in ("--scenario", s))]
    code, out, _ = cli("certify", f"{F}:configured", *flags, "--engine-config", "default", "--engine-config",
                       "warm-cache", "--json", str(path))  # fmt: skip
    assert code == ExitCode.MEETS, out
    assert "default (default)" in out and "state reached: cached_tokens = 40" in out
    doc = json.loads(path.read_text())
    assert validate_document(doc) == "specverify-configurations"
    assert [c["name"] for c in doc["configurations"]] == ["default", "warm-cache"]
    assert all(c["certificate"]["kind"] == "specverify-certificate" for c in doc["configurations"])
    doc["configurations"][0]["certificate"]["verdict"] = "perfect"  # a bad inner certificate is caught
    with pytest.raises(InvalidArgument, match=r"\$\.configurations\[0\]\.certificate: \$\.verdict"):
        validate_document(doc)
    code, out, _ = cli("certify", f"{F}:configured", *flags, "--engine-config", "cold-cache")
    assert code == ExitCode.FALLS_SHORT and "not covered: its state was not reached" in out
    assert "EXACT" in out.upper()  # the certificate itself is printed as for a plain run
    code, _, err = cli("certify", f"{F}:configured", *flags, "--engine-config", "nope")
    assert code == ExitCode.USAGE and "--engine-config 'nope' is not a configuration" in err


def test_a_configuration_names_its_own_scenarios():
    preset = EngineConfig(scenarios=["long-prompt", "multi-turn"])
    assert preset.scenarios == ("long-prompt", "multi-turn") and EngineConfig().scenarios == ()
    with pytest.raises(InvalidArgument, match="scenarios=.* must be a tuple of scenario names"):
        EngineConfig(scenarios="multi-turn")
    with pytest.raises(InvalidArgument, match="names a scenario twice"):
        EngineConfig(scenarios=("multi-turn", "multi-turn"))


def test_configured_matrix_appends_the_configuration_scenarios_and_counts_them_in_m():
    from specverify.certification import checks
    from specverify.certification.matrix.configured import configured_matrix, engine_config_matrix
    from specverify.certification.matrix.scenarios import matrix

    base = matrix("checkpoint")
    names = ("second-block", "long-prompt", "multi-turn")
    ext = configured_matrix(base, names, "checkpoint")
    assert list(ext)[: len(base)] == list(base) and list(ext)[len(base) :] == list(names)  # default places kept
    assert checks.num_tests(ext) == checks.num_tests(base) + 3  # its own α plan counts them
    assert configured_matrix(base, names, "checkpoint") is ext  # built once
    toy = matrix("toy")
    assert configured_matrix(toy, ("long-prompt", "multi-turn")) is toy  # the toy matrix holds both already
    with pytest.raises(InvalidArgument, match="not scenarios of this matrix nor configuration scenarios"):
        configured_matrix(base, ("nope",), "checkpoint")
    from tests.certification import config_decoders

    assert list(engine_config_matrix(base, config_decoders.with_scenarios, "turns", "checkpoint")) == list(ext)
    assert engine_config_matrix(base, config_decoders.with_scenarios, "bare", "checkpoint") is base
    assert engine_config_matrix(base, config_decoders.with_scenarios, None, "checkpoint") is base


def test_the_configuration_scenario_names_by_family():
    from specverify.certification.matrix.checkpoint import CONFIGURATION_SCENARIOS
    from specverify.certification.matrix.configured import configuration_scenario_names

    assert configuration_scenario_names("checkpoint") == CONFIGURATION_SCENARIOS == (
        "one-token-prompt", "second-block", "long-prompt", "multi-turn", "long-prompt-63", "multi-turn-65",
        "structured", "greedy-structured")  # fmt: skip
    assert configuration_scenario_names("toy") == ()  # the toy matrix holds its own


@needs_hf
def test_the_checkpoint_configuration_scenarios_create_their_state():
    from specverify.certification.matrix.checkpoint import (
        LONG_TURN_1_OUTPUT,
        LONG_TURN_1_PROMPT,
        TURN_1_OUTPUT,
        TURN_1_PROMPT,
        configuration_scenarios,
    )
    from specverify.certification.matrix.scenarios import SCENARIOS
    from specverify.oracles.checkpoint_tokenizer import MAX_POSITIONS

    s = configuration_scenarios(SCENARIOS)
    one = s["one-token-prompt"]  # one token to compute in the first step, cached or not
    assert one.prompt == (0,) and one.params.temperature == 1.0 and one.num_draft_tokens == 3
    assert one.pair == s["multi-turn"].pair
    block = 32  # vLLM's CPU KV block; a cached prefix is whole blocks, never the last prompt token
    # second-block: admitted with prompt + γ lookahead in one block, its first round (token + γ drafts) needs two
    grow = s["second-block"]
    assert len(grow.prompt) + grow.num_draft_tokens <= block < len(grow.prompt) + 1 + 2 * grow.num_draft_tokens
    turn1, turn2 = s["long-prompt"], s["multi-turn"]
    assert turn1.prompt == TURN_1_PROMPT and len(turn1.prompt) < block < len(turn1.prompt) + 1 + turn1.num_draft_tokens
    assert turn2.prompt == TURN_1_PROMPT + TURN_1_OUTPUT and len(turn2.prompt) >= block + 1  # a 32-token hit
    assert (turn1.pair, turn1.num_draft_tokens) == (turn2.pair, turn2.num_draft_tokens)  # one engine runs both
    law = sv.exact_law(turn1.models().target, turn1.prompt, turn1.params)
    ends = {o: p for o, p in zip(law.outcomes, law.probs) if o[1] == "eos"}
    assert max(ends, key=ends.get) == (TURN_1_OUTPUT, "eos")  # turn 1's likeliest output that ends in EOS
    assert sum(p for o, p in zip(law.outcomes, law.probs) if o[0][:1] == TURN_1_OUTPUT[:1]) > 0.1  # turn 1 writes it
    # the long pair of turns: turn 2 shares two whole blocks, so a drafter that drops a hit's last block keeps one
    turn1, turn2 = s["long-prompt-63"], s["multi-turn-65"]
    assert turn1.prompt == LONG_TURN_1_PROMPT and len(turn1.prompt) < 2 * block < len(turn1.prompt) + 1 + 3
    assert turn2.prompt == LONG_TURN_1_PROMPT + LONG_TURN_1_OUTPUT and len(turn2.prompt) == 2 * block + 1
    assert (turn1.pair, turn1.num_draft_tokens) == (turn2.pair, turn2.num_draft_tokens) == (one.pair, 3)
    law = sv.exact_law(turn1.models().target, turn1.prompt, turn1.params)
    two = {o: p for o, p in zip(law.outcomes, law.probs) if o[1] == "eos" and len(o[0]) == 2}
    assert max(two, key=two.get) == (LONG_TURN_1_OUTPUT, "eos")  # its likeliest two-token output ending in EOS
    assert sum(p for o, p in zip(law.outcomes, law.probs) if o[0][:1] == LONG_TURN_1_OUTPUT[:1]) > 0.5
    assert len(turn2.prompt) + turn2.params.max_tokens + 2 * 3 <= MAX_POSITIONS  # within the checkpoints' positions


def test_a_run_with_the_configuration_runs_its_scenarios():
    from specverify.certification.config.run_config import RunConfig
    from specverify.certification.run.context import matrix_for

    config = RunConfig.create(factory=f"{F}:with_scenarios", models="checkpoint", engine_config="turns")
    assert list(matrix_for(config))[-3:] == ["second-block", "long-prompt", "multi-turn"]


def test_a_configuration_scenario_can_be_run_alone():  # what the reproduce line of its failure asks for
    from specverify.certification.config.run_config import RunConfig

    alone = RunConfig.create(factory=f"{F}:with_scenarios", models="checkpoint", engine_config="turns",
                             scenarios=["multi-turn"])  # fmt: skip
    assert alone.scenarios == ("multi-turn",)


class _FakeRunner:
    """A runner whose decoders report a state per model pair; it counts the decoders it makes."""

    def __init__(self, states):
        self.states, self.made, self.live = states, [], set()

    def request(self, op, spec, *rest):
        if op == "make":
            self.made.append(spec)
            self.live.add(spec)
            return {"capabilities": ["batch"], "has_sample": False}
        if op == "release":
            self.live.discard(spec)
            return None
        if op == "engine_info":
            assert spec in self.live, f"engine_info asked of a closed decoder {spec!r}"
            return {"name": "fake", "state": dict(self.states[spec])}
        raise AssertionError(op)


class _Scenario:
    def __init__(self, pair):
        self.pair = pair

    def models(self):
        from types import SimpleNamespace

        return SimpleNamespace(target=None, draft=None, spec=self.pair)


def test_the_run_state_counts_every_decoder_even_one_closed_before_the_end():
    # a run that moved on from pair "a" closes its decoder: its state must still count, and asking must not make a
    # fresh decoder (whose state would be empty: a reached configuration reported "not covered")
    from specverify.certification.run.collect import Session

    runner = _FakeRunner({"a": {"cached_tokens": 40, "preemptions": 0}, "b": {"cached_tokens": 3, "preemptions": 2}})
    session = Session(runner)
    first, second = _Scenario("a"), _Scenario("b")
    session.decoder(first)
    session.release_unused([second])
    session.decoder(second)
    info = session.run_engine_info(first)
    assert info["state"] == {"cached_tokens": 40, "preemptions": 2}
    assert runner.made == ["a", "b"]  # no decoder re-made to be asked


def test_a_configuration_scenario_is_a_name_the_options_accept_and_its_plan_checks(capsys):
    """``--engine-config NAME --scenario multi-turn`` (and ``certify_configurations(..., scenarios=["multi-turn"])``):
    a scenario that only a configuration adds to its matrix passes the options' check on the checkpoint family; each
    configuration's plan then checks it against its own matrix, before any work."""
    from specverify.certification.config.run_config import RunConfig
    from specverify.certification.execution.plan import plan

    run = dict(factory=f"{F}:configured", models="checkpoint", scenarios=["multi-turn"])
    assert RunConfig.create(**run).scenarios == ("multi-turn",)
    with pytest.raises(InvalidArgument, match="'multi-turn' is a scenario an engine configuration adds"):
        plan(RunConfig.create(**run))  # no configuration adds it to this run's matrix
    code, _, err = cli("certify", f"{F}:configured", "--models", "checkpoint", "--engine-config", "nosuch",
                       "--scenario", "multi-turn")  # fmt: skip
    assert code == ExitCode.USAGE and "not a scenario" not in err and "nosuch" in err, err
    with pytest.raises(InvalidArgument, match="nosuch"):
        certify_configurations(f"{F}:configured", ["nosuch"], models="checkpoint", scenarios=["multi-turn"])
