"""The rule by hand values, on every implementation: torch twin, per-request rule reference, triton kernel."""

import pytest
import torch

from specverify.kernel_checks.conformance import chain_rule_reference
from specverify.kernels import (
    PAD_TOKEN_ID,
    STATUS_BAD_DRAFT_TOKEN,
    STATUS_BAD_LENGTH,
    STATUS_INVALID_PROBS,
    STATUS_NO_TOKEN,
    categorical_sample,
    categorical_sample_torch,
    chain_rejection_sample,
    chain_rejection_sample_torch,
)

NAN = float("nan")
BELOW_ONE = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0)).item()


@pytest.fixture(params=["torch", "rule", "triton"])
def sampler(request, device):
    def run(*args):
        if request.param == "torch":
            return chain_rejection_sample_torch(*args)
        if request.param == "rule":
            return chain_rule_reference(*args)
        result = chain_rejection_sample(*(a.to(device) for a in args), backend="triton")
        return type(result)(*(t.cpu() for t in result))

    return run


def one(sampler, ids, n, draft, target, u_accept, u_recover):
    """One request; returns (tokens list, num_accepted, status)."""
    out = sampler(
        torch.tensor([ids]),
        torch.tensor([n]),
        torch.tensor([draft]),
        torch.tensor([target]),
        torch.tensor([u_accept]),
        torch.tensor([u_recover]),
    )
    return out.tokens[0].tolist(), int(out.num_accepted[0]), int(out.status[0])


def test_all_accepted_then_bonus(sampler):
    draft = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    target = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.2, 0.3, 0.5]]
    assert one(sampler, [1, 2], 2, draft, target, [0.9, 0.9], [NAN, NAN, 0.25]) == ([1, 2, 1], 2, 0)


def test_strict_acceptance_never_accepts_a_zero_target_token_at_u_zero(sampler):
    draft, target = [[0.5, 0.5]], [[1.0, 0.0], [0.5, 0.5]]
    assert one(sampler, [1], 1, draft, target, [0.0], [0.0, 0.0]) == ([0, PAD_TOKEN_ID], 0, 0)
    assert one(sampler, [0], 1, draft, target, [0.0], [0.0, 0.0]) == ([0, 0], 1, 0)


def test_acceptance_at_exact_ratio_rejects(sampler):
    # u * draft_prob == target_prob exactly: strict comparison rejects; residual (0.25, 0) -> token 0
    draft, target = [[0.25, 0.75]], [[0.5, 0.5], [1.0, 0.0]]
    u = 0.5 / 0.75
    accepted = torch.tensor(u, dtype=torch.float32) * torch.tensor(0.75) < torch.tensor(0.5)
    expected = ([1, 0], 1, 0) if bool(accepted) else ([0, PAD_TOKEN_ID], 0, 0)
    assert one(sampler, [1], 1, draft, target, [u], [0.5, 0.5]) == expected


def test_draft_token_of_zero_draft_probability_is_rejected(sampler):
    # draft_prob = 0: rejected whatever u (even u = 0); the residual (target - draft)+ = (0, .3, .5) gives the token
    draft, target = [[1.0, 0.0, 0.0]], [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]
    assert one(sampler, [2], 1, draft, target, [0.0], [0.6, NAN]) == ([2, PAD_TOKEN_ID], 0, 0)
    assert one(sampler, [2], 1, draft, target, [0.0], [0.1, NAN]) == ([1, PAD_TOKEN_ID], 0, 0)


def test_draft_that_cannot_propose_is_a_plain_target_draw(sampler):
    # an all-zero draft row (docs/design.md): the position falls back to the target row
    draft, target = [[0.0, 0.0, 0.0]], [[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]]
    assert one(sampler, [1], 1, draft, target, [0.0], [0.1, NAN]) == ([0, PAD_TOKEN_ID], 0, 0)
    assert one(sampler, [1], 1, draft, target, [0.0], [0.45, NAN]) == ([1, PAD_TOKEN_ID], 0, 0)


def test_residual_without_mass_falls_back_to_the_target_row(sampler):
    # target a hair below draft everywhere: rejection at u -> 1 leaves no positive residual
    draft = [[0.25, 0.25, 0.5]]
    target = [[0.25 * (1 - 1e-6), 0.25 * (1 - 1e-6), 0.5 * (1 - 1e-6)], [1.0, 0.0, 0.0]]
    tokens, accepted, status = one(sampler, [2], 1, draft, target, [BELOW_ONE], [0.6, NAN])
    assert (tokens, accepted, status) == ([2, PAD_TOKEN_ID], 0, 0)
    assert one(sampler, [2], 1, draft, target, [BELOW_ONE], [0.3, NAN])[0] == [1, PAD_TOKEN_ID]


def test_inverse_cdf_skips_zero_mass_at_both_ends(sampler):
    target = [[0.0, 0.0, 0.4, 0.6, 0.0, 0.0], [NAN] * 6]
    assert one(sampler, [0], 0, [[1.0, 0, 0, 0, 0, 0]], target, [NAN], [0.0, NAN])[0] == [2, PAD_TOKEN_ID]
    assert one(sampler, [0], 0, [[1.0, 0, 0, 0, 0, 0]], target, [NAN], [BELOW_ONE, NAN])[0] == [3, PAD_TOKEN_ID]


def test_all_zero_final_row_is_no_token(sampler):
    draft, target = [[0.0, 1.0]], [[0.0, 1.0], [0.0, 0.0]]
    assert one(sampler, [1], 1, draft, target, [0.5], [NAN, 0.5]) == ([1, PAD_TOKEN_ID], 1, STATUS_NO_TOKEN)


@pytest.mark.parametrize("row, col", [(0, 0), (2, 1)])
def test_invalid_owned_row_flags_the_request_and_emits_nothing(sampler, row, col):
    # row 2 (the bonus row) is never drawn from here, but it is owned: still an error
    draft = [[1.0, 0.0], [1.0, 0.0]]
    target = [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
    target[row][col] = NAN
    assert one(sampler, [0, 0], 2, draft, target, [0.5, 0.5], [0.5, 0.5, 0.5]) == (
        [PAD_TOKEN_ID] * 3,
        0,
        STATUS_INVALID_PROBS,
    )


@pytest.mark.parametrize("value", [NAN, float("inf"), -0.25])
def test_invalid_draft_entries_flag(sampler, value):
    draft, target = [[0.5, 0.5], [0.5, 0.5]], [[0.5, 0.5]] * 3
    draft[1][1] = value
    assert one(sampler, [0, 0], 2, draft, target, [0.5, 0.5], [0.5] * 3)[2] == STATUS_INVALID_PROBS


def test_rows_past_the_draft_length_are_never_read(sampler):
    draft = [[0.5, 0.5], [NAN, NAN]]
    target = [[0.5, 0.5], [0.5, 0.5], [NAN, NAN]]
    tokens, accepted, status = one(sampler, [0, 99], 1, draft, target, [0.1, NAN], [NAN, 0.1, NAN])
    assert (tokens, accepted, status) == ([0, 0, PAD_TOKEN_ID], 1, 0)


def test_out_of_vocabulary_draft_id_is_an_error(sampler):
    draft, target = [[0.5, 0.5]] * 2, [[0.5, 0.5]] * 3
    assert one(sampler, [0, 2], 2, draft, target, [0.1, 0.1], [0.1] * 3) == (
        [PAD_TOKEN_ID] * 3,
        0,
        STATUS_BAD_DRAFT_TOKEN,
    )
    assert one(sampler, [-1, 0], 1, draft, target, [0.1, 0.1], [0.1] * 3)[2] == STATUS_BAD_DRAFT_TOKEN


@pytest.mark.parametrize("n", [-1, 3])
def test_bad_length_is_an_error_and_reads_nothing(sampler, n):
    draft, target = [[NAN, NAN]] * 2, [[NAN, NAN]] * 3
    assert one(sampler, [0, 0], n, draft, target, [0.1, 0.1], [0.1] * 3) == ([PAD_TOKEN_ID] * 3, 0, STATUS_BAD_LENGTH)


def test_zero_drafts_draws_the_bonus_from_row_zero(sampler):
    draft, target = [[NAN, NAN]], [[0.25, 0.75], [NAN, NAN]]
    assert one(sampler, [5], 0, draft, target, [NAN], [0.3, NAN]) == ([1, PAD_TOKEN_ID], 0, 0)


def test_requests_are_independent_of_their_neighbours(sampler):
    # the same request alone and amid others (different lengths, an invalid neighbour) gives the same output
    g = torch.Generator().manual_seed(3)
    target = torch.rand(5, 4, 7, generator=g)
    draft = torch.rand(5, 3, 7, generator=g)
    draft /= draft.sum(-1, keepdim=True)
    ids = torch.randint(0, 7, (5, 3), generator=g)
    n = torch.tensor([3, 0, 2, 1, 3])
    ua, ur = torch.rand(5, 3, generator=g), torch.rand(5, 4, generator=g)
    target[1, 0, 0] = NAN
    together = sampler(ids, n, draft, target, ua, ur)
    for r in range(5):
        alone = sampler(ids[r : r + 1], n[r : r + 1], draft[r : r + 1], target[r : r + 1], ua[r : r + 1], ur[r : r + 1])
        assert all(torch.equal(a[0], b[r]) for a, b in zip(alone, together))


@pytest.fixture(params=["torch", "triton"])
def categorical(request, device):
    def run(probs, uniforms):
        if request.param == "torch":
            return categorical_sample_torch(probs, uniforms)
        result = categorical_sample(probs.to(device), uniforms.to(device), backend="triton")
        return type(result)(*(t.cpu() for t in result))

    return run


def test_categorical_by_hand(categorical):
    probs = torch.tensor(
        [
            [0.0, 0.5, 0.5, 0.0],
            [0.0, 0.5, 0.5, 0.0],
            [0.0, 0.5, 0.5, 0.0],
            [0, 0, 0, 0.0],
            [0.1, NAN, 0.5, 0.0],
            [2.0, 6.0, 0.0, 0.0],
        ]
    )
    uniforms = torch.tensor([0.0, 0.5, BELOW_ONE, 0.3, 0.3, 0.3])
    out = categorical(probs, uniforms)
    assert out.tokens.tolist() == [1, 2, 2, PAD_TOKEN_ID, PAD_TOKEN_ID, 1]
    assert out.status.tolist() == [0, 0, 0, STATUS_NO_TOKEN, STATUS_INVALID_PROBS, 0]
