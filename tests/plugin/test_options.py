"""Options and marker arguments: validated once, with the flag (or ini key, or variable) named in the message."""

import pytest

from specverify.errors import InvalidArgument
from specverify.testing.items import marker_spec
from specverify.testing.options import OPTIONS, Options, resolve


@pytest.mark.parametrize(
    "flags, expected",
    [
        ({"level": "fast"}, "--specverify-level='fast' must be one of 'quick', 'standard', 'thorough'"),
        ({"seed": "-1"}, "--specverify-seed='-1' must be an int in [0, 2**62)"),
        ({"seed": "abc"}, "--specverify-seed='abc' must be an int"),
        ({"alpha": "0.7"}, "--specverify-alpha='0.7' must be a number in (0, 0.5)"),
        ({"models": "llama"}, "--specverify-models='llama' must be one of 'toy', 'checkpoint'"),
        ({"budget": "0"}, "--specverify-budget='0' must be seconds > 0"),
        ({"isolation": "thread"}, "--specverify-isolation='thread' must be one of 'process', 'none'"),
        ({"scenario": ["temprature-1"]}, "--specverify-scenario='temprature-1' is not a scenario. Did you"),
        ({"drafts": "trie"}, "--specverify-drafts='trie' must be one of 'ar', 'heads'"),
        ({"engine_option": ["no-equals"]}, "--specverify-engine-option=['no-equals'] must be KEY=VALUE"),
        ({"json": "/no/such/dir/c.json"}, "--specverify-json='/no/such/dir/c.json': the folder '/no/such/dir' does"),
        ({"update_baseline": True}, "--specverify-update-baseline needs --specverify-baseline DIR"),
    ],
)
def test_bad_flags_name_the_flag_and_the_fix(flags, expected):
    with pytest.raises(InvalidArgument) as info:
        resolve(flags, env={})
    assert expected in str(info.value)


def test_missing_baseline_folder_says_how_to_create_it(tmp_path):
    with pytest.raises(InvalidArgument, match="--specverify-update-baseline"):
        resolve({"baseline": str(tmp_path / "none")}, env={})
    assert resolve({"baseline": str(tmp_path / "new"), "update_baseline": True}, env={}).update_baseline


def test_flag_beats_environment_beats_ini():
    ini = {"specverify_seed": "3", "specverify_level": "standard", "specverify_alpha": "1e-4"}.get
    got = resolve({"seed": None}, ini=lambda key: ini(key, ""), env={"SPECVERIFY_SEED": "5"})
    assert (got.seed, got.level, got.alpha) == (5, "standard", 1e-4)
    got = resolve({"seed": "9"}, ini=lambda key: ini(key, ""), env={"SPECVERIFY_SEED": "5"})
    assert got.seed == 9
    assert got.reproduce_flags() == (
        "--specverify-seed=9 --specverify-level=standard --specverify-alpha=0.0001 --specverify-sequential"
    )
    with pytest.raises(InvalidArgument, match=r"ini specverify_seed='x'"):
        resolve({}, ini=lambda key: "x" if key == "specverify_seed" else "", env={})
    with pytest.raises(InvalidArgument, match=r"\$SPECVERIFY_SEED='x'"):
        resolve({}, env={"SPECVERIFY_SEED": "x"})


def test_every_option_has_an_ini_key_and_round_trips_through_workerinput():
    assert {o.ini for o in OPTIONS} == {"specverify_" + o.name for o in OPTIONS}
    opts = resolve({"seed": "4", "scenario": ["greedy"], "isolation": "none", "engine_option": ["k=[1]"]}, env={})
    assert Options.from_dict(opts.to_dict()) == opts
    assert opts.flat()["scenario"] == ("greedy",) and opts.flat()["engine_option"] == (("k", [1]),)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, "needs factory='module:attr'"),
        ({"factory": "nocolon"}, "@pytest.mark.specverify: factory='nocolon' must be 'module:attr'"),
        ({"factory": "m:f", "requires": "exact"}, "specverify(requires=...): unknown argument(s)"),
        ({"factory": "m:f", "require": "inconclusive"}, "specverify: require='inconclusive' must be a decoder verdict"),
        ({"factory": "m:f", "scenarios": ["nope"]}, "specverify: scenarios='nope' is not a scenario"),
        ({"factory": "m:f", "seed": -2}, "@pytest.mark.specverify: seed=-2 must be an int in [0, 2**62)"),
        ({"factory": "m:f", "timeout": 0}, "@pytest.mark.specverify: timeout=0 must be seconds > 0"),
        ({"factory": "m:f", "allow_inconclusive": "yes"}, "allow_inconclusive='yes'): expected True or False"),
    ],
)
def test_bad_marker_arguments_name_the_argument(kwargs, expected):
    with pytest.raises(InvalidArgument) as info:
        marker_spec((), kwargs, Options())
    assert expected in str(info.value)


def test_marker_arguments_override_the_options():
    spec = marker_spec(("m:f",), {"seed": 3, "level": "thorough", "scenarios": "greedy"}, Options(run=(("seed", 9),)))
    assert (spec.seed, spec.level, spec.scenarios, spec.alpha) == (3, "thorough", ("greedy",), 1e-6)


def test_a_bad_option_stops_pytest_with_a_usage_error_naming_it(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("--specverify-seed", "minus one")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --specverify-seed='minus one' must be an int in [[]0, 2**62)*"])
    pytester.makeini("[pytest]\nspecverify_level = fastest\n")
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["ERROR: ini specverify_level='fastest' must be one of*"])


def test_a_bad_marker_is_a_collection_error_naming_the_test(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.specverify(factory="specverify.reference:make_decoder", scenario=["greedy"])
        def test_x():
            pass
        """
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*test_x: @pytest.mark.specverify(scenario=...): unknown argument(s); use factory*"])


def test_help_lists_the_options_with_their_ini_keys(pytester):
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    for option in OPTIONS:
        assert option.flag in text and option.ini in text, option


def test_engines_and_checkpoints_certify_at_standard_unless_a_level_is_given():
    from specverify.adapters import vllm
    from specverify.adapters.llamacpp import factories as llamacpp
    from specverify.adapters.transformers import factories as transformers
    from specverify.reference import make_decoder
    from specverify.testing.options import level_default

    engines = [vllm.draft_model, transformers.assisted, llamacpp.server_draft_model]
    assert {level_default(f) for f in engines} == {"standard"}
    assert level_default(make_decoder) == "quick" and level_default(make_decoder, "checkpoint") == "standard"
    assert str(Options().config(make_decoder).level) == "quick"
    assert str(Options().config(vllm.draft_model).level) == "standard"
    assert str(resolve({"level": "quick"}, env={}).config(vllm.draft_model).level) == "quick"
    assert str(Options().config(vllm.draft_model, level="thorough").level) == "thorough"
