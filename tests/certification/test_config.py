"""RunConfig: one validator for every surface, and the round trip options -> RunConfig -> reproduce() -> the same
RunConfig."""

import pytest

from specverify.certification import RunConfig
from specverify.certification.config.options import OPTIONS
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


def test_every_option_is_a_row_of_the_table_and_a_field():
    fields = set(RunConfig.__dataclass_fields__) - {"factory"}
    assert {o.name for o in OPTIONS} == fields
    untested = fields - set(EVERY_OPTION) - {"shard", "target_dir", "draft_dir"}  # the three below
    assert not untested, f"give {sorted(untested)} a non-default value in EVERY_OPTION"


@pytest.mark.parametrize(
    "values",
    [
        EVERY_OPTION,
        dict(level="quick", shard=(2, 3), models="checkpoint", scenarios=("greedy",)),
        dict(level="quick", target_dir="/ckpt/t dir", draft_dir="/ckpt/d", against="mod:plain"),
        {},
    ],
    ids=["every-option", "shard", "user-pair", "defaults"],
)
def test_options_to_config_to_command_and_back_are_the_same(values):
    config = RunConfig.create(factory=FACTORY, **values)
    command = config.reproduce()
    assert run_from_command(command)[0] == config, command
    args = parser().parse_args(__import__("shlex").split(command)[1:])  # what the CLI builds from the line
    assert from_args(args)[0] == config
    assert RunConfig.from_dict(config.to_dict()) == config  # the certificate's "run"


def test_one_scenario_of_it_reproduces_with_the_same_options_and_no_shard():
    config = RunConfig.create(factory=FACTORY, level="quick", shard=(2, 3), sequential=True, seed=9)
    line = config.reproduce(scenario="greedy")
    assert line == f"specverify certify {FACTORY} --level quick --sequential --scenario greedy --seed 9"


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
        RunConfig.create(factory=FACTORY, budget=3)


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
