"""Failures raised by specverify inside a test show the test's own line and the message, not the library's frames.

An ``assert_exact`` that fails, or a ``specverify_certify(..., level="bogus")``, used to print some 40 lines of
specverify's source (the helper, ``certify``, ``RunConfig.create``) above a message that already says everything:
what failed, why, and how to reproduce. :func:`trim` drops the frames inside the specverify package from such a
failure's report (an ``AssertionError`` or a ``SpecverifyError`` raised in specverify), as ``__tracebackhide__``
would, by wrapping the item's traceback filter while its report is made: pytest rebuilds the traceback from the raw
frames when it cuts it at the test function, so editing ``excinfo.traceback`` is not enough. The test's frames
stay; any other exception (a bug of ours, an engine's error) keeps its whole traceback, and ``--full-trace`` shows
every frame.
"""

from __future__ import annotations

import os

import specverify
from specverify.errors import SpecverifyError

__all__ = ["trim", "untrim", "trimmed", "is_library_failure"]

_ROOT = os.path.dirname(os.path.abspath(specverify.__file__)) + os.sep


def _inside(entry) -> bool:
    return os.path.abspath(str(entry.path)).startswith(_ROOT)


def is_library_failure(excinfo) -> bool:
    """Whether ``excinfo`` (a pytest ``ExceptionInfo``) is a failure specverify raised with a complete message."""
    if not isinstance(excinfo.value, (AssertionError, SpecverifyError)):
        return False
    traceback = excinfo.traceback
    return len(traceback) > 0 and _inside(traceback[-1])


def trimmed(traceback: object) -> object:
    """``traceback`` (a pytest ``Traceback``) without specverify's frames, unless that leaves none."""
    kept = traceback.filter(lambda entry: not _inside(entry))
    return kept if len(kept) > 0 else traceback


def trim(item, excinfo) -> bool:
    """Make ``item`` show ``excinfo`` without specverify's frames when :func:`is_library_failure`: its traceback
    filter (pytest's, which cuts at the test function) is wrapped until :func:`untrim`. Whether it did."""
    original = getattr(item, "_traceback_filter", None)
    if original is None or item.config.getoption("fulltrace", False) or not is_library_failure(excinfo):
        return False
    item._traceback_filter = lambda info: trimmed(original(info))
    return True


def untrim(item) -> None:
    item.__dict__.pop("_traceback_filter", None)
