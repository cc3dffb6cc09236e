"""A slow-path decoder's whole quick matrix (the reference without its ``sample`` fast path) run every way a run
executes: one engine (``_identity.py``)."""

from tests.certification import _identity

globals().update(_identity.tests_for("tests.certification.resume_decoders:slow_path"))
