"""The marker's ``server=`` / ``url=``: the server adapter's factory with its engine options (docs/servers.md)."""

import pytest

from specverify.errors import InvalidArgument
from specverify.testing.items import _marker_values


def test_server_template_names_the_managed_factory():
    values = _marker_values((), {"server": "srv {target} --port {port}", "dialect": "llamacpp", "level": "quick",
                                 "engine_options": {"max_in_flight": 8}})  # fmt: skip
    assert values["factory"] == "specverify.adapters.server:managed" and values["level"] == "quick"
    assert values["engine_options"] == {"max_in_flight": 8, "template": "srv {target} --port {port}",
                                        "dialect": "llamacpp"}  # fmt: skip


def test_url_with_a_declaration_names_the_attached_factory():
    values = _marker_values((), {"url": "http://gpu-7:8000", "declaration": "deploy.json"})
    assert values["factory"] == "specverify.adapters.server:attached"
    assert values["engine_options"] == {"url": "http://gpu-7:8000", "declaration": "deploy.json"}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"url": "http://h:1"}, "needs declaration"),
        ({"server": "s --port {port}", "url": "http://h:1", "declaration": "d"}, "not both"),
        ({"server": "s --port {port}", "factory": "m:f"}, "no factory"),
        ({"declaration": "d"}, "server="),
    ],
)
def test_server_arguments_checked(kwargs, message):
    with pytest.raises(InvalidArgument, match=message):
        _marker_values((), kwargs)
