"""The chain reference on a recurrent target: exact law and greedy output on the matrix's recurrent scenarios, the
state after every round equal to the state recomputed over the committed tokens, and the zoo's unrestored state
told apart from it."""

import numpy as np
import pytest

from specverify.certification.matrix.scenarios import matrix
from specverify.fuzz import PropertyFailure, check_law
from specverify.oracles import exact_law, greedy_outcome
from specverify.oracles.toy_hash import _prefix_kv
from specverify.protocol import Request
from specverify.reference import RecurrentChainDecoder, make_decoder
from specverify.zoo import ZOO

SCENARIO = matrix("toy")["recurrent"]
PAIR = SCENARIO.models()
REQUEST = Request(SCENARIO.prompt, SCENARIO.params, SCENARIO.num_draft_tokens, seed=1234)
N = 20_000


@pytest.mark.parametrize("name", ["reference", "recurrent_state_not_rolled_back"])
def test_the_law_is_exact_only_with_the_state_restored(name):
    factory = make_decoder if name == "reference" else ZOO[name].factory
    counts = factory(PAIR.target, PAIR.draft).sample(REQUEST, N)
    assert counts.rounds is not None and set(counts.rounds) >= {0, 1, 2}  # rejections before, in and after the block
    law = exact_law(PAIR.target, SCENARIO.prompt, SCENARIO.params)
    if name == "reference":
        check_law(counts.outcomes, law, alpha=1e-6)
    else:
        with pytest.raises(PropertyFailure, match=r"\[law\]"):
            check_law(counts.outcomes, law, alpha=1e-6)


def test_greedy_output_is_the_target_s_on_the_greedy_recurrent_scenario():
    scenario = matrix("toy")["greedy-recurrent"]
    pair = scenario.models()
    prompts = [(i % 3, (i // 3) % 3, i % 2) for i in range(30)]
    requests = [Request(p, scenario.params, scenario.gammas[i % 3], seed=i) for i, p in enumerate(prompts)]
    got = make_decoder(pair.target, pair.draft)(requests)
    assert [(c.tokens, c.finish_reason) for c in got] == [
        greedy_outcome(pair.target, p, scenario.params) for p in prompts
    ]


def test_the_state_after_each_round_is_the_state_over_the_committed_tokens():
    class Checked(RecurrentChainDecoder):
        checked = 0

        def rollback(self, st, rows, drafts):
            super().rollback(st, rows, drafts)
            alive = rows[st.reason[rows] == 0]
            for r in alive.tolist():  # the cache holds prompt + generated, less the last token (fed next round)
                committed = SCENARIO.prompt + tuple(st.out[r, : st.n_gen[r]].tolist())
                assert st.target_cache.state[r] == _prefix_kv(committed[:-1])
                Checked.checked += 1

    Checked(PAIR.target, PAIR.draft).run_group(SCENARIO.prompt, SCENARIO.params, 3, np.arange(200, dtype=np.uint64))
    assert Checked.checked > 100
