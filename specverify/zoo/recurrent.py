"""A zoo entry of the recurrent axis: the recurrent state is not put back after rejected drafts.

On a recurrent target (``specverify.oracles.recurrent``) the verification call feeds ``[last, x_0 .. x_{γ-1}]`` to
the target's state, and no crop can take a rejected draft's input out again: the reference
(``reference.recurrent_chain``) keeps the state after each verified position and restores the one after the last
kept token. An engine that only moves its length back, as it would on a KV cache, keeps the state that has
absorbed the rejected drafts, and the next round reads rows of a history the request never had.
"""

from __future__ import annotations

from specverify.enums import Verdict
from specverify.reference.recurrent_chain import RecurrentChainDecoder
from specverify.zoo._registry import zoo_entry

__all__ = ["recurrent_state_not_rolled_back"]


class _LengthOnly(RecurrentChainDecoder):
    def restore_target(self, st, rows, keep) -> None:
        st.target_cache.lengths[rows] = keep  # mutation: the state keeps the rejected drafts' inputs


@zoo_entry(verdict=Verdict.APPROXIMATE, mechanism="recurrent-state-not-rolled-back", showcases=("recurrent",))
def recurrent_state_not_rolled_back(target, draft, *, entropy=None) -> RecurrentChainDecoder:
    """After a rejection the recurrent target's state keeps the rejected drafts' inputs (llama.cpp #20075).

    The seed's recurrent-state replay, broken: the length goes back to the accepted prefix but the state, advanced
    over every verified position, is not restored from its checkpoint: the next round feeds the recovered token on
    top of a state that has seen ``x_k .. x_{γ-1}``, so every later row comes from a wrong history. Targets with a KV
    cache are untouched (exact there): only the recurrent scenarios (``recurrent``, ``greedy-recurrent``), which a
    decoder declaring ``recurrent`` receives, see it. Verdict: approximate (at temperature 0 a rejected draft still
    moves the state, so the greedy output differs).
    """
    return _LengthOnly(target, draft, entropy=entropy)
