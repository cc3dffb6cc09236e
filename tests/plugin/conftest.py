"""The plugin's tests drive a real pytest with ``pytester`` (in-process unless they say otherwise).

pytester removes the modules an in-process run imported when it ends (torch cannot be imported twice in one
process, and re-importing scipy each run costs seconds; a matplotlib imported twice fails the later report tests'
plots with "Invalid arguments to set_clip_path"), so one small certification here imports, once, what every run
certifies and reports with.
"""

import os

import pytest

import specverify
import specverify.testing.session  # noqa: F401
import specverify.zoo  # noqa: F401

try:  # --specverify-html imports matplotlib inside a run; removed afterwards, a second copy breaks later plots
    import matplotlib.pyplot  # noqa: F401

    import specverify.report.plots  # noqa: F401
except ImportError:  # the report extra is optional
    pass

specverify.certify("specverify.reference:make_decoder", level="quick", scenarios=["gamma-1"], isolation="none")

FAST = ["temperature-1"]  # ~0.2 s a decoder: the law check, acceptance evidence, reproducibility
ISOLATION = ["--specverify-isolation", "none", "-p", "no:randomly"]


@pytest.fixture
def run_suite(pytester):
    """Write ``source`` as a test module and run pytest on it in-process with ``args`` (one thread, no isolation)."""

    def run(source: str, *args: str, name: str = "test_engine"):
        pytester.makepyfile(**{name: source})
        return pytester.runpytest(*ISOLATION, *args)

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return run
