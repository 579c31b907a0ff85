"""``tokrace web``'s guards without a browser: the Host allow-list beyond loopback (against DNS rebinding), a Host
that could not be a name never served (it goes into the page), and the terminal size clamped."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tokrace.tui.cli.web import allowed_hosts, no_authentication_warning
from tokrace.tui.web.server import MAX_COLUMNS, MAX_ROWS, clamp_size, refusal


def test_beyond_loopback_only_this_machines_names_and_allowed_hosts_are_answered() -> None:
    hosts = allowed_hosts(None, "0.0.0.0", ["tokrace.lan"])
    assert {"tokrace.lan", socket.gethostname().lower(), "localhost"} <= hosts
    assert refusal("tokrace.lan:8000", None, hosts=hosts, public_url=None) is None
    rebound = refusal("rebound.example:8000", None, hosts=hosts, public_url=None)
    assert rebound is not None and "--allow-host" in rebound
    assert refusal("tokrace.lan:8000", "http://evil.example", hosts=hosts, public_url=None) is not None
    assert refusal("tokrace.lan:8000", "http://tokrace.lan:8000", hosts=hosts, public_url=None) is None


def test_a_bound_address_is_answered_to() -> None:
    hosts = allowed_hosts(None, "192.0.2.7")
    assert "192.0.2.7" in hosts and refusal("192.0.2.7:8000", None, hosts=hosts, public_url=None) is None


@pytest.mark.parametrize("host", ['localhost:80"><script>alert(1)</script>', "localhost:80/x", "local host",
                                  "localhost:80?a", "<b>"])
def test_a_host_that_is_not_a_name_and_port_is_refused_before_it_reaches_the_page(host: str) -> None:
    problem = refusal(host, None, hosts=None, public_url=None)
    assert problem is not None and "does not answer to the host" in problem


def test_the_warning_says_what_the_allow_list_does_and_does_not_do() -> None:
    warning = no_authentication_warning("0.0.0.0", 8000)
    assert "--allow-host" in warning and "DNS-rebind" in warning and "no authentication" in warning


@pytest.mark.parametrize(("asked", "size"), [
    ((100_000, 100_000), (MAX_COLUMNS, MAX_ROWS)),
    (("120", "40"), (120, 40)),
    ((-5, 0), (1, 1)),
    (("wide", None), (80, 24)),
])
def test_a_tabs_terminal_size_is_clamped(asked: tuple[Any, Any], size: tuple[int, int]) -> None:
    assert clamp_size(*asked) == size
