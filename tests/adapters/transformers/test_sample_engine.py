"""The transformers adapter's fast path: ``sample(request, n, start)`` with per-draw seeds, in-process and split
between worker processes (``specverify.adapters.boundary.draw_pool``, whose failures tests/adapters/boundary
checks).

What must hold (docs/adapters.md, the draw offset): draw i of a seeded request depends on (seed, i) only, so any
split into calls, and any split between workers, gives the same counts; unseeded draws are independent and follow
the exact law; a worker's failure reaches the certifier as an engine error.
"""

import collections

import pytest

pytest.importorskip("transformers", reason="the hf extra is not installed: pip install -e '.[hf]'")

from specverify.adapters import transformers as tfa  # noqa: E402
from specverify.errors import InvalidArgument  # noqa: E402
from specverify.oracles.law import exact_law  # noqa: E402
from specverify.params import SamplingParams  # noqa: E402
from specverify.protocol import Request  # noqa: E402
from specverify.stats import battery  # noqa: E402

PARAMS = SamplingParams(temperature=1.0, max_tokens=3)


@pytest.fixture(scope="module")
def pooled(checkpoint_pair):
    decoder = tfa.assisted(checkpoint_pair.target, checkpoint_pair.draft, workers=2)
    yield decoder
    decoder.close()


def _add(*counts) -> dict:
    return dict(sum((collections.Counter(c) for c in counts), collections.Counter()))


def test_seeded_draws_do_not_depend_on_the_split_or_the_worker(checkpoint_pair, pooled):
    """20 draws of one seeded request: one call through two workers (10 each), two calls of 10 (start 0 and 10), and
    the same 20 in this process give the same outcome, first-round and all-round counts. (20, not 40: each draw is a
    generate() call on a CPU core shared with the other test worker; 20 seeds give 8 distinct outcomes.)"""
    request = Request((0, 1), PARAMS, num_draft_tokens=3, seed=11)
    before = pooled.engine_info["state"]["dynamic_cache_calls"]
    whole = pooled.sample(request, 20)
    head, tail = pooled.sample(request, 10), pooled.sample(request, 10, start=10)
    in_process = tfa.assisted(checkpoint_pair.target, checkpoint_pair.draft, workers=0)
    alone = in_process.sample(request, 20)
    # the engine-state evidence of the workers' calls reaches the parent's engine_info (one per generate call)
    assert pooled.engine_info["state"]["dynamic_cache_calls"] - before == 40
    assert in_process.engine_info["state"] == {"dynamic_cache_calls": 20, "static_cache_calls": 0,
                                                "other_cache_calls": 0}  # fmt: skip
    assert whole.outcomes == _add(head.outcomes, tail.outcomes) == alone.outcomes
    assert whole.accepted == _add(head.accepted, tail.accepted) == alone.accepted
    assert whole.rounds == _add(head.rounds, tail.rounds) == alone.rounds
    assert sum(whole.outcomes.values()) == sum(whole.accepted.values()) == 20
    assert len(whole.outcomes) > 5  # 20 different seeds, not one seed 20 times
    assert set(whole.accepted) <= {0, 1, 2, 3} and sum(whole.rounds.values()) >= 20


@pytest.mark.slow
def test_unseeded_draws_through_the_workers_follow_the_exact_law(checkpoint_pair, pooled):
    """200 unseeded draws split between the workers: every outcome possible, and the battery (α = 1e-6) passes."""
    law = exact_law(checkpoint_pair.target, (0, 1), PARAMS)
    got = pooled.sample(Request((0, 1), PARAMS, num_draft_tokens=3), 200)
    counts, impossible = law.align(collections.Counter(got.outcomes))
    assert not impossible
    assert battery(counts, law.probs, alpha=1e-6, seed=0).passed
    plain = tfa.plain(checkpoint_pair.target, checkpoint_pair.draft, workers=0).sample(Request((0, 1), PARAMS), 5)
    assert plain.accepted is None and plain.rounds is None and sum(plain.outcomes.values()) == 5


@pytest.mark.parametrize("workers", [-1, True, 1.5])
def test_workers_must_be_a_count(checkpoint_pair, workers):
    with pytest.raises(InvalidArgument, match="workers="):
        tfa.assisted(checkpoint_pair.target, checkpoint_pair.draft, workers=workers)
