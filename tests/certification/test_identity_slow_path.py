"""A slow-path decoder's whole quick matrix (the reference without its ``sample`` fast path) run every way a run
executes: one engine (``_identity.py``)."""

import pytest

from tests.certification import _identity as identity

FACTORY = "tests.certification.resume_decoders:slow_path"


@pytest.fixture(scope="module")
def whole():
    cert = identity.inline(FACTORY)
    assert cert.verdict == "exact", cert.reason
    return cert


def test_in_draw_blocks(whole):
    identity.in_blocks(FACTORY, whole)


def test_as_shards_merged_in_any_order(whole):
    identity.as_shards(FACTORY, whole)


def test_resumed_after_a_sigkill(whole, tmp_path):
    identity.resumed_after_sigkill(FACTORY, whole, tmp_path)


def test_as_pytest_items(whole, pytester):
    identity.as_plugin_items(FACTORY, whole, pytester)
