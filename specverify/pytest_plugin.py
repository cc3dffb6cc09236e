"""pytest plugin: ``--specverify-level`` / ``--specverify-seed`` options, the ``specverify`` marker and fixture.

Loading the plugin imports neither torch, triton nor hypothesis; heavy imports happen inside the fixture.
"""

from __future__ import annotations

import os

import pytest

from specverify.enums import Level


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specverify", "speculative decoding certification")
    group.addoption(
        "--specverify-level",
        default=None,
        choices=[level.value for level in Level],
        help="certification level for the specverify fixture (default: quick, or $SPECVERIFY_LEVEL)",
    )
    group.addoption(
        "--specverify-seed",
        type=int,
        default=None,
        help="seed for the specverify fixture (default: 0, or $SPECVERIFY_SEED)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "specverify: certifies a speculative decoder (specverify fixture)")


def _level(config) -> str:
    return config.getoption("--specverify-level") or os.environ.get("SPECVERIFY_LEVEL", "quick")


def _seed(config) -> int:
    seed = config.getoption("--specverify-seed")
    return seed if seed is not None else int(os.environ.get("SPECVERIFY_SEED", "0"))


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.pluginmanager.hasplugin("specverify") and any(
        "specverify" in str(a) for a in config.invocation_params.args
    ):
        return f"specverify: level={_level(config)} seed={_seed(config)} (reproduce: --specverify-seed={_seed(config)})"
    return None


@pytest.fixture
def specverify_options(request: pytest.FixtureRequest) -> dict:
    """The level and seed this run certifies at: ``{"level": ..., "seed": ...}``."""
    return {"level": _level(request.config), "seed": _seed(request.config)}
