"""Public surface of the checking tools: ``__all__``, lazy imports, doctests, argument checks."""

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest
import torch

import specverify.kernel_checks as kernel_checks
from specverify.errors import InvalidArgument
from specverify.kernels import chain_rejection_sample_torch

PUBLIC = [
    "ConformanceReport",
    "GridLawResult",
    "MUTANTS",
    "RoundCase",
    "RoundLaw",
    "RoundLawTestResult",
    "as_flashinfer_style",
    "as_vllm_style",
    "assert_categorical_conformance",
    "assert_chain_conformance",
    "categorical_near_boundary",
    "chain_near_boundary",
    "chain_rule_reference",
    "check_categorical_conformance",
    "check_chain_conformance",
    "check_grid_law",
    "check_kernel_law",
    "drawing_own_uniforms",
    "exact_round_law",
    "from_flashinfer_style",
    "from_vllm_acceptance",
    "from_vllm_rejection_sample",
    "from_vllm_rejection_sampler",
    "from_vllm_style",
    "grid_round_law",
    "round_law_test",
    "sampled_round_law",
    "truncated_case",
]
MODULES = sorted(info.name for info in pkgutil.iter_modules(kernel_checks.__path__))
CASE = kernel_checks.RoundCase([[0.6, 0.4], [0.3, 0.7]], [[0.5, 0.5]])


def test_all_is_exactly_the_checks_and_every_name_resolves():
    assert kernel_checks.__all__ == PUBLIC and dir(kernel_checks) == PUBLIC
    for name in kernel_checks.__all__:
        assert getattr(kernel_checks, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'chain_rejection_sample'"):
        kernel_checks.chain_rejection_sample  # noqa: B018  (a kernel: specverify.kernels)
    assert MODULES == [
        "adapters",
        "conformance",
        "law",
        "lawcheck",
        "mutants",
        "randomness",
        "strategies",
        "vllm_acceptance",
        "vllm_sampler",
        "vllm_types",
    ]


def test_imports_are_lazy():
    # importing the package imports neither torch nor triton; the checks themselves never import triton/hypothesis,
    # and the vLLM adapters import vLLM only when called
    code = (
        "import sys, specverify.kernel_checks as c\n"
        "assert 'triton' not in sys.modules and 'torch' not in sys.modules\n"
        "[getattr(c, name) for name in c.__all__]\n"
        "assert 'triton' not in sys.modules and 'hypothesis' not in sys.modules and 'vllm' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "0"})


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    # strategies has no doctest (hypothesis examples are not for doctests); it must still import cleanly
    result = doctest.testmod(importlib.import_module(f"specverify.kernel_checks.{module}"))
    assert (result.attempted or module == "strategies") and not result.failed, result


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: kernel_checks.check_grid_law(None, CASE), "sampler=None is not callable"),
        (lambda: kernel_checks.check_grid_law(chain_rejection_sample_torch, "case"), "case='case' must be a RoundCase"),
        (lambda: kernel_checks.grid_round_law(chain_rejection_sample_torch, CASE, grid_size=1), "grid_size=1 must be"),
        (
            lambda: kernel_checks.sampled_round_law(chain_rejection_sample_torch, CASE, num_samples=0, seed=0),
            "num_samples=0 must be",
        ),
        (lambda: kernel_checks.from_vllm_style(3), "fn=3 is not callable"),
        (
            lambda: kernel_checks.as_flashinfer_style(chain_rejection_sample_torch, generator=0),
            "generator=0 must be a torch.Generator",
        ),
        (
            lambda: kernel_checks.check_categorical_conformance(None, torch.ones(1, 2), torch.zeros(1)),
            "kernel=None, reference=.* must be callable",
        ),
    ],
)
def test_bad_arguments_raise_invalid_argument(call, words):
    with pytest.raises(InvalidArgument, match=words):
        call()


def test_strategies_check_their_bounds():
    from specverify.kernel_checks.strategies import categorical_inputs, chain_inputs

    with pytest.raises(InvalidArgument, match=r"max_num_draft_tokens=0 must be an int >= 1"):
        chain_inputs(max_num_draft_tokens=0)
    with pytest.raises(InvalidArgument, match=r"dtypes=\(torch.int32,\) must be"):
        categorical_inputs(dtypes=(torch.int32,))
