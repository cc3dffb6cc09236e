"""Property tests for speculative decoders: hypothesis strategies of their inputs and black-box law properties.

What a user writing property tests needs, against any decoder of the public protocol:

- strategies: ``probability_vectors``, ``law_pairs``, ``sampling_params``, ``requests``, ``prompts``,
  ``num_draft_tokens_sequences``, ``stop_sets``, ``toy_grammars``;
- law and batch properties: ``check_law`` over ``batch_outcomes``, ``check_batch_independence``;
- one-position and matcher properties: ``one_position_law`` / ``check_one_position_law``, ``check_stop_matcher``
  (with ``naive_stop_hits`` / ``dfa_stop_hits``), ``check_matcher_rollback`` over ``matcher_cases`` (xgrammar);
- ``PropertyFailure``, raised by every property.

The streaming harness (the text layer under multi-token deltas: ``check_chunking`` over ``chunkings`` of a token
sequence, the ``StreamConsumer`` protocol, ``toy_bpe_tokenizer``) is ``specverify.fuzz.streaming``, apart like the
white-box harness.

The white-box harness (a decoder driven round by round: ``WhiteBoxDecoder``, schedules, injected faults, the
state-transaction properties, ``ReferenceWhiteBox`` and its mutants) is ``specverify.fuzz.whitebox``.

Importing this module imports hypothesis (``import specverify`` does not).
"""

from specverify.fuzz.grammars import check_matcher_rollback, matcher_cases
from specverify.fuzz.laws import batch_outcomes, check_batch_independence, check_law
from specverify.fuzz.properties import (
    PropertyFailure,
    check_one_position_law,
    check_stop_matcher,
    dfa_stop_hits,
    naive_stop_hits,
    one_position_law,
)
from specverify.fuzz.strategies import (
    law_pairs,
    num_draft_tokens_sequences,
    probability_vectors,
    prompts,
    requests,
    sampling_params,
    stop_sets,
    toy_grammars,
)

__all__ = [
    # strategies
    "probability_vectors",
    "law_pairs",
    "sampling_params",
    "requests",
    "prompts",
    "num_draft_tokens_sequences",
    "stop_sets",
    "toy_grammars",
    # law and batch properties (black-box)
    "check_law",
    "batch_outcomes",
    "check_batch_independence",
    # one position, stop matcher, grammar matcher
    "one_position_law",
    "check_one_position_law",
    "naive_stop_hits",
    "dfa_stop_hits",
    "check_stop_matcher",
    "check_matcher_rollback",
    "matcher_cases",
    "PropertyFailure",
]
