"""The reference decoders: exact chain speculative sampling (vectorized and transactional) and plain sampling.

``make_decoder`` is what ``specverify certify specverify.reference:make_decoder`` certifies. Every decoder here
follows the protocol of docs/adapters.md and the model cache API of docs/design.md.
"""

from specverify.reference.block import BlockDecoder
from specverify.reference.chain_families import FamilyChainDecoder
from specverify.reference.paged import BlockPool, OutOfBlocks, PagedCache
from specverify.reference.plain import PlainDecoder, decode_plain, sample_plain
from specverify.reference.recurrent_chain import RecurrentChainDecoder
from specverify.reference.transactional import TransactionalDecoder
from specverify.reference.tree import TreeDecoder
from specverify.reference.tree_data import Tree, canonical_tree, permute_tree, validate_tree
from specverify.reference.vectorized import VectorizedDecoder

__all__ = [
    "make_decoder",
    "make_block_decoder",
    "decode_plain",
    "sample_plain",
    "VectorizedDecoder",
    "FamilyChainDecoder",
    "RecurrentChainDecoder",
    "TreeDecoder",
    "BlockDecoder",
    "Tree",
    "canonical_tree",
    "permute_tree",
    "validate_tree",
    "TransactionalDecoder",
    "BlockPool",
    "PagedCache",
    "OutOfBlocks",
]


def make_decoder(target: object, draft: object) -> VectorizedDecoder:
    """The reference decoder: exact chain speculative sampling, vectorized (docs/design.md, canonical semantics);
    for a draft family (``draft.family``, ``--drafts``) the family's chain rule, or tree verification for trees; on a
    recurrent target (``target.recurrent``) the chain reference that checkpoints and restores its state."""
    family = getattr(draft, "family", "ar")
    if family == "tree":
        return TreeDecoder(target, draft)
    if family == "ar" and getattr(target, "recurrent", False):
        return RecurrentChainDecoder(target, draft)
    return VectorizedDecoder(target, draft) if family == "ar" else FamilyChainDecoder(target, draft)


def make_block_decoder(target: object, draft: object) -> BlockDecoder:
    """Block verification (Sun et al. 2024) over any chain draft family: exact in the joint law of the block."""
    return BlockDecoder(target, draft)


def plain(target: object, draft: object) -> PlainDecoder:
    """Plain target sampling, speculation off: the control for ``specverify certify ... --against plain``."""
    return PlainDecoder(target, draft)
