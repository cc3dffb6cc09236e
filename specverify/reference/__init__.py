"""The reference speculative decoders (vectorized and transactional) and plain target sampling."""

from specverify.protocol import Completion, Request
from specverify.reference.plain import decode_plain, sample_plain
from specverify.reference.vectorized import VectorizedDecoder
from specverify.sampling import verify_candidate

__all__ = ["make_decoder", "decode_plain", "sample_plain", "VectorizedDecoder", "verify_candidate", "Request",
           "Completion"]
from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache  # noqa: E402
from specverify.reference.transactional import TransactionalDecoder  # noqa: E402
__all__ += ["TransactionalDecoder", "BlockPool", "PagedCache", "OutOfBlocks"]


def make_decoder(target, draft):
    """The reference decoder for ``specverify certify specverify.reference:make_decoder``: exact chain
    speculative sampling (vectorized) following DESIGN.md's protocol."""
    return VectorizedDecoder(target, draft)
