"""The speed model against hand-computed values, its warnings and its argument checks."""

import pytest

from specverify.errors import InvalidArgument
from specverify.metrics import expected_tokens_per_call, speed_model


def test_expected_tokens_by_hand():
    assert expected_tokens_per_call(0.8, 4) == pytest.approx(1 + 0.8 + 0.64 + 0.512 + 0.4096)  # 3.3616
    assert expected_tokens_per_call(0.0, 5) == pytest.approx(1.0)
    assert expected_tokens_per_call(1.0, 5) == pytest.approx(6.0)
    assert expected_tokens_per_call([0.9, 0.5, 0.2], 3) == pytest.approx(1 + 0.9 + 0.45 + 0.09)
    assert expected_tokens_per_call([0.9], 3) == pytest.approx(1 + 0.9 + 0.81 + 0.729)  # the last rate carries on


def test_speedup_and_best_gamma_by_hand():
    model = speed_model(0.8, 4, t_target=10.0, t_draft=1.0, t_verify=10.0)
    assert model.speedup == pytest.approx(3.3616 * 10 / (4 * 1 + 10))
    ratios = {g: expected_tokens_per_call(0.8, g) * 10 / (g + 10) for g in range(1, 17)}
    assert model.best_num_draft_tokens == max(ratios, key=ratios.get)
    assert model.best_speedup == pytest.approx(max(ratios.values()))
    per_gamma = speed_model(0.8, 2, t_target=10.0, t_draft=1.0, t_verify=[10.0, 12.0])
    assert per_gamma.speedup == pytest.approx(expected_tokens_per_call(0.8, 2) * 10 / (2 + 12))


def test_warnings_name_their_thresholds():
    names = {
        w.name
        for w in speed_model(
            0.3, 4, t_target=10, t_draft=4, batch=128, output_len=3, draft_params=4e9, target_params=8e9
        ).warnings
    }
    assert names == {"low_acceptance", "short_output", "saturated_batch", "draft_memory", "no_speedup"}
    assert speed_model(0.9, 4, t_target=10, t_draft=0.5, output_len=500).warnings == ()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(acceptance=1.5, num_draft_tokens=4, t_target=1, t_draft=1), "--acceptance=1.5"),
        (dict(acceptance=0.5, num_draft_tokens=0, t_target=1, t_draft=1), "--gamma=0"),
        (dict(acceptance=0.5, num_draft_tokens=2, t_target=0, t_draft=1), "--t-target=0"),
        (dict(acceptance=[0.5, -1], num_draft_tokens=2, t_target=1, t_draft=1), "--acceptance-per-position"),
    ],
)
def test_bad_arguments_use_the_cli_names(kwargs, match):
    with pytest.raises(InvalidArgument, match=match):
        speed_model(kwargs.pop("acceptance"), kwargs.pop("num_draft_tokens"), **kwargs)


def test_speedup_cli_prints_the_hand_computed_value_and_json():
    import io
    import json

    from specverify.cli import ExitCode, main

    out, err = io.StringIO(), io.StringIO()
    assert main(["speedup", "--acceptance", "0.8", "--gamma", "4"], out=out, err=err) == ExitCode.MEETS
    assert "E[K] = 3.3616" in out.getvalue()
    out = io.StringIO()
    assert main(["speedup", "--acceptance-per-position", "0.9,0.5", "--gamma", "2", "--json"], out=out) == 0
    assert json.loads(out.getvalue())["expected_tokens_per_target_call"] == pytest.approx(2.35)
    err = io.StringIO()
    assert main(["speedup", "--acceptance-per-position", "0.9,x"], out=io.StringIO(), err=err) == ExitCode.USAGE
    assert "--acceptance-per-position='0.9,x'" in err.getvalue()
