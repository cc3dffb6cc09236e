"""The reference decoders: exact chain speculative sampling (vectorized and transactional) and plain sampling.

``make_decoder`` is what ``specverify certify specverify.reference:make_decoder`` certifies. Every decoder here
follows the protocol of docs/adapters.md and the model cache API of docs/design.md.
"""

from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache
from specverify.reference.plain import PlainDecoder, decode_plain, sample_plain
from specverify.reference.transactional import TransactionalDecoder
from specverify.reference.vectorized import VectorizedDecoder

__all__ = [
    "make_decoder",
    "decode_plain",
    "sample_plain",
    "VectorizedDecoder",
    "TransactionalDecoder",
    "BlockPool",
    "PagedCache",
    "OutOfBlocks",
]


def make_decoder(target: object, draft: object) -> VectorizedDecoder:
    """The reference decoder: exact chain speculative sampling, vectorized (docs/design.md, canonical semantics)."""
    return VectorizedDecoder(target, draft)


def plain(target: object, draft: object) -> PlainDecoder:
    """Plain target sampling, speculation off: the control for ``specverify certify ... --against plain``."""
    return PlainDecoder(target, draft)
