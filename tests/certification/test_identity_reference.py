"""The reference decoder's whole quick matrix run every way a run executes: one engine (``_identity.py``)."""

from tests.certification import _identity

globals().update(_identity.tests_for("specverify.reference:make_decoder"))
