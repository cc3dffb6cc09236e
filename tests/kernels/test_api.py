"""Public surface: ``__all__``, lazy imports, argument checks that raise ``InvalidArgument``."""

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys

import pytest
import torch

import specverify.kernels as kernels
from specverify.errors import InvalidArgument
from specverify.kernels import categorical_sample, chain_rejection_sample

PUBLIC = [
    "CategoricalResult",
    "ChainInputs",
    "ChainResult",
    "ERROR_MASK",
    "PAD_TOKEN_ID",
    "STATUS_BAD_DRAFT_TOKEN",
    "STATUS_BAD_LENGTH",
    "STATUS_INVALID_PROBS",
    "STATUS_NO_TOKEN",
    "STATUS_OK",
    "categorical_sample",
    "categorical_sample_torch",
    "chain_rejection_sample",
    "chain_rejection_sample_torch",
    "describe_status",
    "keyed_chain_uniforms",
]
MODULES = sorted(info.name for info in pkgutil.iter_modules(kernels.__path__))


def test_all_is_exactly_the_kernels_and_every_name_resolves():
    assert kernels.__all__ == PUBLIC and dir(kernels) == PUBLIC
    for name in kernels.__all__:
        assert getattr(kernels, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'check_grid_law'"):
        kernels.check_grid_law  # noqa: B018  (moved to specverify.kernel_checks)
    assert MODULES == ["_triton", "layout", "ops", "twins"]


def test_kernels_never_import_the_checks():
    code = (
        "import sys, importlib, specverify.kernels as k\n"
        f"for module in {MODULES!r}: importlib.import_module('specverify.kernels.' + module)\n"
        "[getattr(k, name) for name in k.__all__]\n"
        "assert not [name for name in sys.modules if name.startswith('specverify.kernel_checks')]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "1"})


def test_imports_are_lazy():
    # importing specverify(.kernels) imports neither torch nor triton; the torch twin never imports triton
    code = (
        "import sys, specverify, specverify.kernels as k\n"
        "assert 'triton' not in sys.modules and 'torch' not in sys.modules\n"
        "import torch\n"
        "k.chain_rejection_sample(torch.zeros(1, 1, dtype=torch.long), torch.ones(1, dtype=torch.long), "
        "torch.ones(1, 1, 2), torch.ones(1, 2, 2) / 2, torch.zeros(1, 1), torch.zeros(1, 2), backend='torch')\n"
        "assert 'triton' not in sys.modules and 'hypothesis' not in sys.modules\n"
        "assert not any(name.startswith('specverify.kernel_checks') for name in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "0"})


def _args(batch=2, gamma=3, vocab=5):
    return [
        torch.zeros(batch, gamma, dtype=torch.long),
        torch.full((batch,), gamma),
        torch.full((batch, gamma, vocab), 0.2),
        torch.full((batch, gamma + 1, vocab), 0.2),
        torch.zeros(batch, gamma),
        torch.zeros(batch, gamma + 1),
    ]


@pytest.mark.parametrize(
    "index, bad, words",
    [
        (0, torch.zeros(2, 3), "draft_token_ids.dtype"),
        (0, torch.zeros(2, dtype=torch.long), "draft_token_ids.shape=(2,)"),
        (1, torch.zeros(3, dtype=torch.long), "num_draft_tokens.shape=(3,)"),
        (2, torch.zeros(2, 3, 4), "draft_probs.shape=(2, 3, 4)"),
        (3, torch.zeros(2, 3, 5), "bonus row"),
        (3, torch.zeros(2, 4, 5, dtype=torch.float64), "cast both to one dtype"),
        (4, torch.zeros(2, 3, dtype=torch.long), "u_accept.dtype"),
        (5, torch.zeros(2, 3), "u_recover.shape=(2, 3)"),
        (2, [[0.2]], "must be a torch.Tensor"),
    ],
)
def test_chain_argument_errors_name_the_argument_and_the_fix(index, bad, words):
    args = _args()
    args[index] = bad
    with pytest.raises(InvalidArgument, match=words.replace("(", r"\(").replace(")", r"\)")):
        chain_rejection_sample(*args, backend="torch")


def test_backend_name_is_checked():
    with pytest.raises(InvalidArgument, match="backend='cuda'"):
        chain_rejection_sample(*_args(), backend="cuda")


def test_triton_backend_needs_contiguous_probabilities(device):
    args = [a.to(device) for a in _args()]
    args[3] = torch.full((2, 5, 4), 0.2, device=device).transpose(1, 2)
    with pytest.raises(InvalidArgument, match=r"target_probs .* must be contiguous.*target_probs.contiguous\(\)"):
        chain_rejection_sample(*args, backend="triton")


def test_categorical_argument_errors():
    with pytest.raises(InvalidArgument, match=r"uniforms.shape=\(3,\), expected \(2,\)"):
        categorical_sample(torch.ones(2, 4), torch.zeros(3))
    with pytest.raises(InvalidArgument, match="probs.shape=.* rank 2"):
        categorical_sample(torch.ones(4), torch.zeros(4))


def test_describe_status():
    assert kernels.describe_status(0) == "ok"
    both = kernels.STATUS_INVALID_PROBS | kernels.STATUS_BAD_LENGTH
    assert kernels.describe_status(both) == "invalid_probs|bad_length"
    assert kernels.ERROR_MASK & kernels.STATUS_NO_TOKEN == 0


def test_keyed_chain_uniforms_depend_on_seed_and_position_not_batch():
    from specverify.kernels import keyed_chain_uniforms
    from specverify.sampling import Purpose, keyed_uniforms

    u_accept, u_recover = keyed_chain_uniforms([7, 8, 7], [0, 5, 0], 3)
    assert torch.equal(u_accept[0], u_accept[2]) and torch.equal(u_recover[0], u_recover[2])
    alone = keyed_chain_uniforms([8], [5], 3)
    assert torch.equal(alone[0][0], u_accept[1]) and torch.equal(alone[1][0], u_recover[1])
    expected = torch.tensor(keyed_uniforms([8], [7], Purpose.TARGET), dtype=torch.float32)
    assert u_recover[1, 2] == expected[0] and bool((u_accept < 1).all() & (u_recover < 1).all())
    assert (
        u_accept.dtype == torch.float32
        and keyed_chain_uniforms([1], [0], 1, dtype=torch.float64)[0].dtype == torch.float64
    )


def test_keyed_chain_uniforms_checks_the_number_of_draft_tokens():
    from specverify.kernels import keyed_chain_uniforms

    with pytest.raises(InvalidArgument, match=r"num_draft_tokens=-1 must be an int >= 0"):
        keyed_chain_uniforms([1], [0], -1)


@pytest.mark.parametrize("module", MODULES)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(f"specverify.kernels.{module}"))
    assert result.attempted and not result.failed, result
