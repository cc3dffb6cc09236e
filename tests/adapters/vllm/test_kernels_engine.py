"""The kernel checks against vLLM 0.32's real rejection sampler, no model involved (vLLM venv only):

    .venv-vllm/bin/python -m pytest tests/adapters/vllm/test_kernels_engine.py -q -p no:cacheprovider

Nine round cases, each N = 20000 independent rounds through ``round_law_test`` at α = 1e-6 / 9 (Bonferroni over the
cases of one entry point). ``rejection_sample`` alone receives processed logits and is exact; through
``RejectionSampler.forward`` (``apply_sampling_constraints``) the per-draft temperature is uninitialised memory on
CPU (docs/findings/vllm.md, finding 1) and most cases are rejected; with that expansion written into its output
(a test-local replacement of ``_expand_kernel_impl``, bound by re-registering the overrides) ``forward`` is exact,
at other temperatures and with top-k / top-p too. If a vLLM upgrade fixes finding 1, the rejection test fails.
"""

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
pytest.importorskip("vllm", reason="vLLM is not installed in this venv: see .ci/run's vLLM venv")

import torch  # noqa: E402

from specverify.errors import InvalidArgument  # noqa: E402
from specverify.kernel_checks import (  # noqa: E402
    RoundCase,
    check_grid_law,
    from_vllm_rejection_sample,
    from_vllm_rejection_sampler,
    round_law_test,
    truncated_case,
)
from specverify.kernel_checks.vllm_acceptance import from_vllm_acceptance  # noqa: E402
from specverify.kernel_checks.vllm_types import load_vllm_kernels  # noqa: E402

CASES = {
    "v3_n1": RoundCase([[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]], [[0.3, 0.3, 0.4]]),
    "v4_n1": RoundCase([[0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.1, 0.1, 0.4, 0.4]]),
    "v3_n2": RoundCase([[0.5, 0.3, 0.2], [0.1, 0.3, 0.6], [0.25, 0.45, 0.3]], [[0.2, 0.5, 0.3], [0.6, 0.3, 0.1]]),
    "v4_n2": RoundCase(
        [[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]],
        [[0.1, 0.1, 0.4, 0.4], [0.4, 0.4, 0.1, 0.1]],
    ),
    "v2_n3": RoundCase([[0.7, 0.3], [0.4, 0.6], [0.2, 0.8], [0.5, 0.5]], [[0.3, 0.7], [0.6, 0.4], [0.5, 0.5]]),
    "zero_target_draft": RoundCase([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[0.3, 0.3, 0.4]]),
    "one_hot_target": RoundCase([[0.0, 1.0, 0.0], [0.2, 0.3, 0.5]], [[0.4, 0.3, 0.3]]),
    "v5_near_draft": RoundCase([[0.22, 0.18, 0.2, 0.25, 0.15], [0.3, 0.1, 0.2, 0.1, 0.3]], [[0.2, 0.2, 0.2, 0.2, 0.2]]),
    "no_drafts": RoundCase([[0.2, 0.5, 0.3]], np.zeros((0, 3))),
}
N = 20_000
ALPHA = 1e-6 / len(CASES)
# top-k/top-p on the cases with drafts only: top-k on a batch without draft rows kills vLLM (finding 2)
ZERO_TARGET_DRAFTS = {"zero_target_draft", "one_hot_target"}  # a draft token of target probability 0 can be proposed
CONSTRAINED = {"temperature=0.5": dict(temperature=0.5), "top_k=2": dict(top_k=2), "top_p=0.75": dict(top_p=0.75)}


def _expand_in_place(output, input_val, cu_num_tokens, replace_from, replace_to, MAX_NUM_TOKENS=None):  # noqa: N803
    # finding 1's patch, test-local: the expanded values written into `output` itself, in its dtype
    ends = cu_num_tokens.long()  # [B]
    counts = torch.diff(ends, prepend=ends.new_zeros(1))  # [B]
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)  # [B]
    output[: int(ends[-1]) if ends.numel() else 0] = values.repeat_interleave(counts).to(output.dtype)


@pytest.fixture(scope="module")
def kernels():
    load_vllm_kernels()  # as an engine start does: vLLM's own CPU overrides


def _strict_uniforms(original):
    # the acceptance patch, test-local: the C++ kernel accepts when target/draft >= u (as the Triton kernel,
    # rejection_sampler.py:884), so u = 0 accepts a token of target probability 0; no u below float32's tiny
    def impl(*args, **kwargs):
        args = list(args)
        args[7] = args[7].to(torch.float32).clamp_min(torch.finfo(torch.float32).tiny).double()  # uniform_probs
        return original(*args, **kwargs)

    return impl


@pytest.fixture
def strict_acceptance(kernels, monkeypatch):
    from vllm.utils import cpu_triton_utils

    original = cpu_triton_utils._rejection_random_sample_kernel_impl
    monkeypatch.setattr(cpu_triton_utils, "_rejection_random_sample_kernel_impl", _strict_uniforms(original))
    load_vllm_kernels()
    yield
    monkeypatch.undo()
    load_vllm_kernels()


def _grid(case):
    return check_grid_law(from_vllm_acceptance(), case, grid_size=32 if case.num_draft_tokens <= 1 else 8)


@pytest.fixture
def patched(kernels, monkeypatch):
    from vllm.utils import cpu_triton_utils

    monkeypatch.setattr(cpu_triton_utils, "_expand_kernel_impl", _expand_in_place)
    load_vllm_kernels()  # the overrides are bound when registered: re-register to bind the patch
    yield
    monkeypatch.undo()
    load_vllm_kernels()


def law_results(make_sampler, cases, *, num_samples=N, alpha=ALPHA, truncate=None) -> dict:
    """{case name: RoundLawTestResult}, one fresh sampler per case seeded by its index."""
    results = {}
    for index, (name, case) in enumerate(cases.items()):
        expected = case if truncate is None else truncated_case(case, **truncate)
        results[name] = _test(make_sampler(index), case, expected, num_samples, index, alpha)
    return results


def _test(sampler, case, expected, num_samples, seed, alpha):
    if expected is case:
        return round_law_test(sampler, case, num_samples=num_samples, seed=seed, alpha=alpha)
    # the sampler sees the case's rows; the engine's top-k/top-p make the expected law the truncated case's
    return round_law_test(_on_rows_of(sampler, case), expected, num_samples=num_samples, seed=seed, alpha=alpha)


def _on_rows_of(sampler, case):
    target = torch.as_tensor(case.target_probs, dtype=torch.float32)

    def run(ids, n, draft, _target, u_accept, u_recover):
        return sampler(ids, n, draft, target.expand(ids.shape[0], -1, -1).contiguous(), u_accept, u_recover)

    run.consumes_uniforms, run.seed, run.__qualname__ = False, sampler.seed, sampler.__qualname__
    return run


def _failures(results) -> dict:
    return {name: r.pvalue for name, r in results.items() if not r.passed}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.int64])
def test_the_cpu_expand_kernel_writes_only_int64_outputs(kernels, dtype):
    # finding 1's mechanism at the function apply_sampling_constraints calls (v1/sample/rejection_sampler.py:550):
    # temperature / top-p are float32 and top-k int32 (gpu_input_batch.py:195-214); int64 is the control
    from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens

    cu = torch.tensor([3, 6], dtype=torch.int32)
    values = torch.tensor([0.37, 0.71] if dtype.is_floating_point else [37, 71], dtype=dtype)
    got = expand_batch_to_tokens(values, cu, 6, replace_from=0, replace_to=1)
    want = values.repeat_interleave(3)
    assert torch.equal(got, want) == (dtype == torch.int64), got


def test_rejection_sample_alone_is_exact(kernels):
    results = law_results(lambda seed: from_vllm_rejection_sample(seed=seed), CASES)
    assert not _failures(results), {name: r.summary() for name, r in results.items() if not r.passed}


def test_grid_law_refuses_vllms_own_randomness(kernels):
    with pytest.raises(InvalidArgument, match=r"consumes_uniforms=False .* check_grid_law cannot apply"):
        check_grid_law(from_vllm_rejection_sample(), CASES["v3_n1"])


def test_forward_is_rejected_finding_1(kernels):
    results = law_results(lambda seed: from_vllm_rejection_sampler(seed=seed), CASES)
    rejected = _failures(results)
    assert "no_drafts" not in rejected  # no draft rows, nothing expanded: the bonus path is exact
    assert len(rejected) >= 6, {name: r.pvalue for name, r in results.items()}


@pytest.mark.parametrize("name", ["top_k=2", "top_p=0.75"])
def test_forward_with_top_k_or_top_p_is_not_exact_finding_1(kernels, name):
    # top-k (int32) and top-p (float32) are expanded like the temperature: unwritten memory; a garbage top-k makes
    # apply_top_k_only index out of range (topk_topp_sampler.py:517-537), any other garbage a wrong law
    options = CONSTRAINED[name]
    cases = {key: case for key, case in CASES.items() if case.num_draft_tokens > 0 and _decidable(case, options)}
    try:
        results = law_results(
            lambda seed: from_vllm_rejection_sampler(seed=seed, **options), cases, truncate=options, num_samples=10_000
        )
    except RuntimeError as error:
        assert "out of bounds" in str(error) or "out of range" in str(error), error
        return
    assert len(_failures(results)) >= len(cases) - 2, {key: r.pvalue for key, r in results.items()}


def test_forward_with_the_expand_patch_is_exact(patched):
    results = law_results(lambda seed: from_vllm_rejection_sampler(seed=seed), CASES)
    assert not _failures(results), {name: r.summary() for name, r in results.items() if not r.passed}


def _decidable(case, truncate) -> bool:  # truncated_case refuses rows where tie order or rounding would decide
    try:
        truncated_case(case, **truncate)
    except InvalidArgument:
        return False
    return True


@pytest.mark.parametrize("name", sorted(CONSTRAINED))
def test_forward_with_the_expand_patch_is_exact_under_constraints(patched, name):
    options = CONSTRAINED[name]
    truncate = {key: value for key, value in options.items() if key != "temperature"} or None
    cases = {
        key: case
        for key, case in CASES.items()
        if case.num_draft_tokens > 0 and (truncate is None or _decidable(case, truncate))
    }
    assert len(cases) >= 6
    results = law_results(
        lambda seed: from_vllm_rejection_sampler(seed=seed, **options), cases, truncate=truncate, num_samples=10_000
    )
    assert not _failures(results), {key: r.summary() for key, r in results.items() if not r.passed}


def test_acceptance_step_accepts_a_zero_probability_draft_at_u_0(kernels):
    # the grid drives vLLM's acceptance kernel with explicit uniforms: u = 0 is a grid point
    results = {name: _grid(case) for name, case in CASES.items()}
    failed = {name for name, result in results.items() if not result.passed}
    assert failed == ZERO_TARGET_DRAFTS, {name: r.summary() for name, r in results.items()}
    for name in ZERO_TARGET_DRAFTS:
        assert results[name].impossible and all(outcome[1] >= 1 for outcome in results[name].impossible)


def test_acceptance_step_with_strict_uniforms_is_exact_on_the_grid(strict_acceptance):
    results = {name: _grid(case) for name, case in CASES.items()}
    assert all(result.passed for result in results.values()), {n: r.summary() for n, r in results.items()}
