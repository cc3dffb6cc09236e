"""RunConfig and Execution: one validator for every surface, one rule table for combinations, and the round trip
options -> (RunConfig, Execution) -> command line -> the same pair."""

import re

import pytest

from specverify.certification import RunConfig
from specverify.certification.config.execution import (
    Execution,
    command_line,
    create_run,
    from_args,
    run_from_command,
)
from specverify.certification.config.options import OPTIONS
from specverify.certification.config.rules import RULES
from specverify.cli_args import parser
from specverify.errors import InvalidArgument
from specverify.testing.items import marker_spec
from specverify.testing.options import Options, resolve

FACTORY = "specverify.reference:make_decoder"
EVERY_OPTION = dict(  # a value other than the default for every option
    level="thorough",
    seed=2**40 + 3,
    alpha=1.25e-7,
    power=0.95,
    models="toy",
    drafts="tree",
    scenarios=("temperature-1", "greedy"),
    isolation="none",
    timeout_s=33.5,
    threads=2,
    budget_s=123.4567,
    max_samples=50_000,
    sequential=True,
    against="plain",
    engine_options=(("draft_sample_method", "greedy"), ("numbers", [1, 2.5]), ("text_digits", "123")),
    engine_config="prefix-cache",
    require="greedy-only",
    require_reproducible=True,
    require_metrics=True,
    require_speculation=True,
)


EXECUTION_SHAPE = dict(  # what the command spells
    block_draws=4096, shard=(2, 3), counts_out="/tmp/p 2.json", engine_configs=("prefix-cache", "preempt")
)


def test_every_option_is_a_row_of_the_table_and_a_field():
    run = set(RunConfig.__dataclass_fields__) - {"factory"}
    execution = set(Execution.__dataclass_fields__)
    assert {o.name for o in OPTIONS if o.owner == "run"} == run
    assert {o.name for o in OPTIONS if o.owner == "execution"} == execution
    untested = run - set(EVERY_OPTION) - {"target_dir", "draft_dir", "control"}  # the user pair and control, below
    assert not untested, f"give {sorted(untested)} a non-default value in EVERY_OPTION"
    spelled = {o.name for o in OPTIONS if o.owner == "execution" and o.in_command}
    assert spelled == set(EXECUTION_SHAPE), "give every execution option the command spells a value above"


@pytest.mark.parametrize(
    "values",
    [
        EVERY_OPTION,
        dict(level="quick", models="checkpoint", scenarios=("greedy",), **EXECUTION_SHAPE),
        dict(level="quick", target_dir="/ckpt/t dir", draft_dir="/ckpt/d", against="mod:plain"),
        dict(level="quick", models="checkpoint", control="mod:plain_server"),  # --control goes without --against
        {},
    ],
    ids=["every-option", "execution", "user-pair", "control", "defaults"],
)
def test_options_to_config_to_command_and_back_are_the_same(values):
    config, execution = create_run(factory=FACTORY, **values)
    command = command_line(config, execution)
    assert run_from_command(command) == (config, execution), command
    args = parser().parse_args(__import__("shlex").split(command)[1:])  # what the CLI builds from the line
    assert from_args(args) == (config, execution)
    assert RunConfig.from_dict(config.to_dict()) == config  # the certificate's "run"


def test_one_scenario_of_it_reproduces_with_the_same_options_whole():
    config, execution = create_run(factory=FACTORY, level="quick", sequential=True, seed=9, **EXECUTION_SHAPE)
    line = command_line(config, execution, scenario="greedy")
    assert line == f"specverify certify {FACTORY} --level quick --sequential --scenario greedy --seed 9"
    spelled = " --block-draws 4096 --engine-config prefix-cache --engine-config preempt"
    assert command_line(config, execution.whole) == line.replace(" --scenario greedy", spelled)
    assert command_line(config, execution.one) == line.replace(" --scenario greedy", " --block-draws 4096")


def test_how_a_run_executes_is_not_spelled_in_its_command_and_reads_back_as_the_default():
    how = dict(executor="ray", ray_address="auto", ray_workers=3, resume="/tmp/r.json")
    config, execution = create_run(factory=FACTORY, level="quick", **how)
    assert execution == Execution(**how) and command_line(config, execution) == command_line(config)
    args = parser().parse_args(["certify", FACTORY, "--executor", "ray", "--ray-workers", "3", "--resume", "x"])
    assert from_args(args)[1] == Execution(executor="ray", ray_workers=3, resume="x")


@pytest.mark.parametrize(
    "values, python, cli",
    [
        (dict(block_draws=5, budget_s=10), "block_draws=5 cannot be used with budget_s", "--block-draws=5 cannot"),
        (dict(block_draws=5, max_samples=10), "block_draws=5 cannot be used with max_samples", "with --max-samples"),
        (dict(shard=(1, 2), executor="ray"), "shard=(1, 2) with executor ray", "--shard=(1, 2) with --executor ray"),
        (dict(ray_workers=2), "ray_workers=2 needs executor ray", "--ray-workers=2 needs --executor ray"),
        (dict(counts_out="p.json"), "counts_out='p.json' needs shard I/N", "--counts-out='p.json' needs --shard"),
        (dict(drafts="tree", models="checkpoint"), "drafts runs on the toy models only", "--drafts runs on the"),
        (dict(target_dir="t", draft_dir="d", against="plain", budget_s=9), "budget_s cannot be used with target_dir",
         "--budget cannot be used with --target"),
    ],
)  # fmt: skip
def test_one_rule_table_refuses_combinations_without_a_meaning_with_its_reason(values, python, cli):
    with pytest.raises(InvalidArgument, match=re.escape(python)):
        create_run(factory=FACTORY, **values)
    text = {k: f"{v[0]}/{v[1]}" if isinstance(v, tuple) else str(v) for k, v in values.items()}
    with pytest.raises(InvalidArgument) as info:
        create_run("cli", factory=FACTORY, **text)
    assert cli.split("=")[0] in str(info.value) and " ".join(cli.split()[-2:]) in str(info.value)


def test_combinations_with_a_meaning_are_not_in_the_table():
    create_run(factory=FACTORY, executor="ray", resume="r.json", budget_s=60)  # Ray with resume and a budget
    create_run(factory=FACTORY, executor="ray", engine_config=["a", "b"])  # Ray with several configurations
    create_run(factory=FACTORY, block_draws=100, against="plain")  # parts with --against
    create_run(factory=FACTORY, drafts="tree", shard=(1, 2), resume="r.json", engine_config=["a", "b"])
    with pytest.raises(InvalidArgument, match="needs --counts-out PATH: a shard's evidence is its counts file"):
        create_run("cli", factory=FACTORY, shard="1/2")  # a command-line run would lose the shard's evidence
    assert all(rule.why.endswith(".") for rule in RULES)


def test_several_configurations_are_the_execution_s_one_is_the_run_s():
    config, execution = create_run(factory=FACTORY, engine_config=["prefix-cache"])
    assert config.engine_config == "prefix-cache" and execution.engine_configs == ()
    config, execution = create_run(factory=FACTORY, engine_config=["a", "b"])
    assert config.engine_config is None and execution.engine_configs == ("a", "b")
    assert create_run(factory=FACTORY, engine_config="all")[1].engine_configs == ("all",)
    with pytest.raises(InvalidArgument, match="together with engine_configs: give the configurations in one list"):
        create_run(factory=FACTORY, engine_config="a", engine_configs=["b", "c"])


@pytest.mark.parametrize(
    "name, bad, python, cli, plugin, marker",
    [
        ("seed", -1, "seed=-1", "--seed='-1'", "--specverify-seed='-1'", "specverify: seed=-1"),
        ("budget_s", 0, "budget_s=0", "--budget='0'", "--specverify-budget='0'", "specverify: budget=0"),
        ("drafts", "trie", "drafts='trie'", "--drafts='trie'", "--specverify-drafts='trie'", "drafts='trie'"),
    ],
)
def test_one_validator_names_the_option_as_each_surface_spells_it(name, bad, python, cli, plugin, marker):
    """The same rule and the same words everywhere; only the option's spelling differs."""
    messages = []
    with pytest.raises(InvalidArgument) as info:
        RunConfig.create(factory=FACTORY, **{name: bad})
    messages.append(str(info.value))
    with pytest.raises(InvalidArgument) as info:
        RunConfig.create("cli", factory=FACTORY, **{name: str(bad)})
    messages.append(str(info.value))
    stem = next(o for o in OPTIONS if o.name == name)
    with pytest.raises(InvalidArgument) as info:
        resolve({stem.plugin: str(bad)}, env={})
    messages.append(str(info.value))
    with pytest.raises(InvalidArgument) as info:
        marker_spec((FACTORY,), {stem.marker_name or name: bad}, Options())
    messages.append(str(info.value))
    for message, spelled in zip(messages, (python, cli, plugin, marker)):
        assert spelled in message, message
    assert len({m[m.index(" must ") :] for m in messages}) == 1, messages  # one expectation, worded once


def test_scenario_names_are_one_name_each_and_checked_against_the_matrix():
    assert RunConfig.create(factory=FACTORY, scenarios="greedy").scenarios == ("greedy",)  # not six letters
    with pytest.raises(InvalidArgument, match="scenarios='greedi' is not a scenario. Did you mean 'greedy'"):
        RunConfig.create(factory=FACTORY, scenarios="greedi")
    with pytest.raises(InvalidArgument, match="--scenario='target-zero' is not a scenario. It is toy-only"):
        RunConfig.create("cli", factory=FACTORY, models="checkpoint", scenarios=["target-zero"])
    with pytest.raises(InvalidArgument, match="not certify options; use factory, level"):
        create_run(factory=FACTORY, budget=3)


def test_engine_option_values_are_json_when_they_parse_else_strings():
    config = RunConfig.create("cli", factory=FACTORY, engine_options=["a=1", "b=x", 'c="1"', 'd=[1, {"e": 2}]'])
    assert dict(config.engine_options) == {"a": 1, "b": "x", "c": "1", "d": [1, {"e": 2}]}
    with pytest.raises(InvalidArgument, match="keys are Python identifiers"):
        RunConfig.create("cli", factory=FACTORY, engine_options=["not-a-key=1"])


def echo(target, draft, **options):
    """A factory that records the options it was given (the reference decoder, with them as an attribute)."""
    from specverify.reference import make_decoder

    decoder = make_decoder(target, draft)
    decoder.options = dict(options)
    return decoder


echo.engine_configs = {"fast": {"a": 1, "b": "x"}}


def test_engine_options_and_configs_reach_the_factory():
    from specverify.certification.run.factory import factory_options

    config = RunConfig.create(factory=f"{__name__}:echo", engine_config="fast", engine_options={"b": "y", "c": [1]})
    assert factory_options(echo, config) == {"a": 1, "b": "y", "c": [1]}  # the options win over the preset
    with pytest.raises(InvalidArgument, match=r"engine_config='slow' is not a configuration of .*\['fast'\]"):
        factory_options(echo, RunConfig.create(factory=f"{__name__}:echo", engine_config="slow"))
    import specverify as sv

    cert = sv.certify(f"{__name__}:echo", level="quick", scenarios=["greedy"], engine_options={"z": 2})
    assert cert.verdict == "inconclusive" and "--engine-option z=2" in cert.command  # not the core: one scenario
    wrong = sv.certify("specverify.reference:make_decoder", level="quick", scenarios=["greedy"], isolation="none",
                       engine_options={"no_such_option": 1})  # fmt: skip
    assert wrong.verdict == "error" and "no_such_option" in wrong.reason


@pytest.mark.parametrize("factory", [FACTORY, "specverify.zoo:medusa_padding_as_token_0"])
def test_a_certificates_command_reads_back_as_its_configuration(factory):
    import specverify as sv

    cert = sv.certify(factory, level="quick", scenarios=["greedy"], isolation="none", sequential=True)
    assert run_from_command(cert.command)[0] == cert.config
    assert cert.config.draft_family == ("tree" if "zoo" in factory else "ar")  # the zoo entry's own family
