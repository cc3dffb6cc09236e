"""pytest plugin: certify speculative decoders inside a test suite (docs/pytest_plugin.md).

Options (group ``specverify``, each with an ini key ``specverify_*``): the run options of the certifier's table
(``--specverify-level``, ``-seed``, ``-alpha``, ``-models``, ``-drafts``, ``-scenario``, ``-budget``,
``-isolation``, ``-timeout``, ``-fixed`` / ``-sequential``, ``-engine-option``, ``-require``, ``-require-*``), and
``-json``, ``-html``, ``-baseline DIR``, ``--specverify-update-baseline``, ``-baseline-tolerance`` and
``-progress``. A decoder that misses its requirement with no failed item gets a failing report of its own
(``NODEID::specverify-verdict``: terminal counts, JUnit). Fixtures: ``specverify_certify`` (certify with the
session's options), ``specverify_result`` (a marker item's scenario result), ``specverify_pair`` (toy or checkpoint
model pair), ``specverify_scenarios`` (the matrix), ``specverify_options``. The marker
``@pytest.mark.specverify(factory=..., require=..., level=..., scenarios=...)`` expands a test into one item per
scenario; under pytest-xdist workers send their results through ``workeroutput`` and the controller decides each
decoder's verdict once. The helpers live in ``specverify.testing``; loading this module imports neither torch,
triton nor hypothesis (certifying does, inside the hooks).
"""

from __future__ import annotations

from typing import Callable

import pytest

from specverify.errors import InvalidArgument
from specverify.testing.options import OPTIONS, Options, resolve

_OPTIONS = pytest.StashKey[Options]()
_LEDGER = pytest.StashKey[object]()
_DECISIONS = pytest.StashKey[list]()
_RESULT = pytest.StashKey[object]()
_MARKER_HELP = (
    "specverify(factory, *, require='exact', level=, seed=, alpha=, models=, scenarios=, budget=, isolation=, "
    "timeout=, allow_inconclusive=False, and every other run option of `specverify certify`): certify FACTORY, one "
    "item per scenario (docs/pytest_plugin.md); server='TEMPLATE' or url='URL', declaration='FILE' (and dialect=) "
    "instead of FACTORY certify an HTTP server (docs/servers.md)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specverify", "speculative decoding certification (docs/pytest_plugin.md)")
    for o in OPTIONS:
        text = f"{o.help} [ini {o.ini}" + (f", env ${o.env}]" if o.env else "]")
        text = text.replace("%", "%%")  # argparse formats help with %
        if o.metavar is None:
            group.addoption(o.flag, action="store_true", default=False, help=text)
        elif o.ini_type == "linelist":
            group.addoption(o.flag, action="append", default=[], metavar=o.metavar, help=text)
        else:
            group.addoption(o.flag, default=None, metavar=o.metavar, help=text)
        default = {"bool": False, "linelist": []}.get(o.ini_type, "")
        parser.addini(o.ini, o.help, type=o.ini_type, default=default)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    given = getattr(config, "workerinput", {}).get("specverify_options")
    if given is not None:  # an xdist worker: the controller's resolved options
        options = Options.from_dict(given)
    else:
        try:
            options = resolve({o.name: config.getoption(o.flag) for o in OPTIONS}, ini=config.getini)
        except InvalidArgument as exc:
            raise pytest.UsageError(str(exc)) from None
    from specverify.testing.ledger import Ledger

    config.stash[_OPTIONS] = options
    config.stash[_LEDGER] = Ledger()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """xdist controller: hand every worker the resolved options (seed included), as pytest-randomly does."""
    node.workerinput["specverify_options"] = node.config.stash[_OPTIONS].to_dict()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: gather a finished worker's results into the session's ledger."""
    text = getattr(node, "workeroutput", {}).get("specverify")
    if text:
        node.config.stash[_LEDGER].merge(text)


def pytest_report_header(config: pytest.Config) -> str:
    from specverify.testing.summary import header_line

    return header_line(config.stash[_OPTIONS])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("specverify")
    if marker is None:
        return
    from specverify.testing.session import CONFIG_PARAM, SCENARIO_PARAM, expand

    try:
        pairs = expand(marker, metafunc.config.stash[_OPTIONS])
    except InvalidArgument as exc:
        pytest.fail(f"{metafunc.definition.nodeid}: {exc}", pytrace=False)
    if SCENARIO_PARAM not in metafunc.fixturenames:
        metafunc.fixturenames.append(SCENARIO_PARAM)
    if all(config is None for config, _ in pairs):
        names = [name for _, name in pairs]
        metafunc.parametrize(SCENARIO_PARAM, names, ids=names)
        return
    if CONFIG_PARAM not in metafunc.fixturenames:  # several configurations: one item per (configuration, scenario)
        metafunc.fixturenames.append(CONFIG_PARAM)
    ids = [f"{config}/{name}" for config, name in pairs]
    metafunc.parametrize((CONFIG_PARAM, SCENARIO_PARAM), pairs, ids=ids)


def _is_marker_item(item: pytest.Item) -> bool:
    from specverify.testing.session import SCENARIO_PARAM

    return SCENARIO_PARAM in getattr(getattr(item, "callspec", None), "params", {})


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A marker item certifies its scenario after skip marks are evaluated (the skipping plugin's setup runs first)
    and before its fixtures (``specverify_result``) are set up (the runner's setup, registered earlier, runs last)."""
    if not _is_marker_item(item):
        return
    from specverify.testing.session import setup_item

    result = setup_item(item, item.config.stash[_OPTIONS], item.config.stash[_LEDGER])
    item.stash[_RESULT] = result
    if result.meta.get("skip"):
        try:  # reported against the item's own location, as a skip mark would be
            raise pytest.skip.Exception(result.meta["skip"], _use_item_location=True)
        except TypeError:  # a pytest without that keyword: the skip still shows its reason
            pytest.skip(result.meta["skip"])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    result = item.stash.get(_RESULT, None)
    if result is not None and result.failure:
        pytest.fail(result.failure, pytrace=False)


@pytest.hookimpl(hookwrapper=True)  # old-style: pytest 7.4 has no wrapper=True
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """A failure specverify raised (a helper's AssertionError, an InvalidArgument) shows the test's line and its
    message, not specverify's frames (``specverify.testing.tracebacks``)."""
    trimming = False
    if call.excinfo is not None:
        from specverify.testing.tracebacks import trim

        trimming = trim(item, call.excinfo)
    try:
        yield
    finally:
        if trimming:
            from specverify.testing.tracebacks import untrim

            untrim(item)


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: the verdict's report must be in it
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if _LEDGER not in config.stash:
        return
    ledger = config.stash[_LEDGER]
    ledger.close_workers()  # the decoders this process kept for its items
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller decides
        config.workeroutput["specverify"] = ledger.dump()
        return
    if not ledger.groups:
        return
    from specverify.testing.session import finish_session

    decisions = finish_session(ledger, config.stash[_OPTIONS])
    config.stash[_DECISIONS] = decisions
    if any(d.meets is False for d in decisions) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _report_verdicts(config, decisions)


def _report_verdicts(config: pytest.Config, decisions: list) -> None:
    """A decoder that fails its requirement with no failed item gets a failing report of its own (terminal counts,
    JUnit); every verdict is a JUnit testsuite property."""
    from specverify.testing.junit import suite_properties, verdict_reports

    reports = verdict_reports(decisions, config.stash[_OPTIONS])
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if reports and terminal is not None:  # their own line, and progress counted over them (not "[200%]")
        terminal.ensure_newline()
        session = getattr(terminal, "_session", None)
        if session is not None:
            session.testscollected += sum(r.when == "call" for r in reports)
    for report in reports:
        if terminal is not None and report.when == "call" and terminal.verbosity <= 0:
            terminal.write(f"{report.nodeid} ")
        config.hook.pytest_runtest_logreport(report=report)
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest without it: the reports above still reach the JUnit file
        return
    xml = config.stash.get(xml_key, None)
    for name, value in suite_properties(decisions) if xml is not None else ():
        xml.add_global_property(name, value)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    decisions = config.stash.get(_DECISIONS, None)
    if not decisions:
        return
    from specverify.testing.summary import summary_lines

    terminalreporter.write_sep("=", "specverify certification")
    for line in summary_lines(decisions, config.stash[_OPTIONS]):
        terminalreporter.write_line(line)


@pytest.fixture
def specverify_options(request: pytest.FixtureRequest) -> dict:
    """The session's resolved options by plugin option name (level, seed, alpha, models, drafts, scenario, budget,
    isolation, sequential, engine_option, json, html, baseline, update_baseline)."""
    return request.config.stash[_OPTIONS].flat()


@pytest.fixture
def specverify_certify(request: pytest.FixtureRequest) -> Callable[..., object]:
    """``specverify_certify(factory, **certify_kwargs) -> Certificate`` with the session's options (kwargs win);
    recorded in the summary, JUnit and (with ``--specverify-baseline``) checked against the stored certificate."""
    from specverify.testing.session import certify_call

    calls = []

    def run(factory: object, **kwargs: object) -> object:
        calls.append(factory)
        config = request.config
        return certify_call(
            request.node, config.stash[_OPTIONS], config.stash[_LEDGER], factory, kwargs, index=len(calls) - 1
        )

    return run


@pytest.fixture
def specverify_result(request: pytest.FixtureRequest) -> object:
    """The scenario result of a ``@pytest.mark.specverify`` item (``specverify.testing.items.ItemResult``)."""
    result = request.node.stash.get(_RESULT, None)
    if result is None:
        pytest.fail(
            f"{request.node.nodeid}: specverify_result needs @pytest.mark.specverify(factory='module:attr') on "
            "the test (it is that item's scenario result).",
            pytrace=False,
        )
    return result


@pytest.fixture
def specverify_pair(request: pytest.FixtureRequest) -> object:
    """A built model pair (``.target``, ``.draft``). Parametrise indirectly with a family (``"toy"``,
    ``"checkpoint"``), a distance, ``(family, distance)`` or a dict of ``specverify.testing.model_pair``
    arguments; the default is ``--specverify-models``' family with its default pair."""
    from specverify.testing import model_pair

    param = getattr(request, "param", None)
    family = request.config.stash[_OPTIONS].models
    if isinstance(param, dict):
        return model_pair(**{"family": family, **param})
    if isinstance(param, tuple):
        return model_pair(*param)
    if isinstance(param, str):
        return model_pair(param)
    return model_pair(family, param)


@pytest.fixture
def specverify_scenarios(request: pytest.FixtureRequest) -> dict:
    """The scenario matrix of the session's model family: name -> ``CertificationScenario``."""
    from specverify.certification.matrix.scenarios import matrix

    return dict(matrix(request.config.stash[_OPTIONS].models))
