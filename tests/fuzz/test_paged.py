"""Paged KV under random operations at every block offset (block sizes 1, 2, 3, 16), with prefix sharing and
copy-on-write, against flat caches; each broken variant is caught."""

import pytest
from hypothesis import event, find

from specverify.fuzz import PropertyFailure
from specverify.fuzz.whitebox.paged import check_paged_operations, paged_cases
from specverify.reference.paged import PagedCache
from tests.fuzz._budget import fast_and_full, search


@fast_and_full(250, paged_cases())
def test_paged_caches_read_like_flat_caches_under_sharing_and_copy_on_write(case):
    event(f"block_size {case['block_size']}")
    counts = check_paged_operations(case)
    for name, count in counts.items():
        if count:
            event(name)


class NoCopyOnWrite(PagedCache):
    """Writes into a block another cache shares (no copy first)."""

    def _make_last_block_writable(self):
        if self._length % self.pool.block_size:
            self.pool.unpublish(self._table[-1])


class CropKeepsLastBlock(PagedCache):
    """A crop to a block boundary keeps (and leaks) the block after it."""

    def crop(self, length):
        keep = -(-length // self.pool.block_size)
        if length and length % self.pool.block_size == 0 and keep < len(self._table):
            self.pool.acquire(self._table[keep])  # never released again
        super().crop(length)


class StaleSlotAfterCrop(PagedCache):
    """A crop to an offset inside a block leaves the length one past the kept entries' real end on regrowth."""

    def forward(self, tokens):
        if self._length and self._length % self.pool.block_size == 1 and len(self._table) > 1:
            self._length -= 1  # overwrites the first slot of the last block: one committed entry is lost
        return super().forward(tokens)


@pytest.mark.parametrize("cache_class", [NoCopyOnWrite, CropKeepsLastBlock, StaleSlotAfterCrop])
def test_paged_property_catches_broken_caches(cache_class):
    def fails(case):
        try:
            check_paged_operations(case, cache_class=cache_class)
        except PropertyFailure:
            return True
        return False

    find(paged_cases(), fails, settings=search(200))
