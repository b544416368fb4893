"""Where the server may connect (issue 26, A-3): lore_platform.outbound, over real sockets on 127.0.0.x.

The rule refuses internal addresses unless the operator allow-lists them, checks every connection when it
is opened (not once at save time), connects to the address it checked, and never follows a redirect past it.
"""
from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx2 as httpx
import pytest

from lore_platform import outbound


class Listener:
    """An internal service on a loopback address: counts what reaches it, answers with a secret banner."""

    BANNER = "INTERNAL-ADMIN secret banner"

    def __init__(self, host: str = "127.0.0.1", *, redirect_to: str = "") -> None:
        self.hits: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                listener.hits.append(f"{self.command} {self.path}")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = listener.BANNER.encode()
                self.send_response(307 if redirect_to else 200)
                if redirect_to:
                    self.send_header("Location", redirect_to)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # http.server calls do_<METHOD>

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.host = host
        self.port = int(self._server.server_address[1])
        self.url = f"http://{host}:{self.port}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def internal() -> Iterator[Listener]:
    listener = Listener()
    yield listener
    listener.stop()


@pytest.fixture(autouse=True)
def nothing_allowed(settings: Any) -> None:
    settings.OUTBOUND_ALLOW = []


def fake_dns(monkeypatch: Any, answers: dict[str, list[list[str]]]) -> list[str]:
    """Names answer from ``answers`` (one list per lookup, the last one repeating); asked names are recorded."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append(host)
        rounds = answers[host]
        return rounds[min(asked.count(host) - 1, len(rounds) - 1)]

    monkeypatch.setattr(outbound, "resolver", resolve)
    return asked


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.9", "private"), ("192.168.1.20", "private"),
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"), ("100.100.100.200", "metadata"),
    ("169.254.10.1", "link-local"), ("fe80::1", "link-local"),
    ("fc00::5", "unique-local"), ("fd12:3456::1", "unique-local"),
    ("224.0.0.251", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("100.64.0.1", "reserved"), ("240.0.0.1", "reserved"),
    # IPv6 spellings of IPv4 internals are the internals they stand for.
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "metadata"), ("64:ff9b::a00:1", "private"),
    ("2002:7f00:1::", "loopback"),
    ("93.184.215.14", None), ("2606:4700:4700::1111", None),
])
def test_every_internal_range_is_refused_and_public_addresses_pass(address: str, kind: str | None) -> None:
    assert outbound.address_class(ipaddress.ip_address(address)) == kind


def test_the_operator_allow_list_admits_exactly_what_it_names(settings: Any) -> None:
    settings.OUTBOUND_ALLOW = ["127.0.0.1:8080", "10.0.0.0/8", "llm.internal", "[::1]:9000", "169.254.0.0/16"]
    outbound.addresses_checked("127.0.0.1", 8080)
    with pytest.raises(outbound.OutboundRefused) as other_port:
        outbound.addresses_checked("127.0.0.1", 8081)
    assert other_port.value.reason == "loopback"
    outbound.addresses_checked("10.20.30.40", 443)
    outbound.addresses_checked("::1", 9000)
    outbound.addresses_checked("169.254.3.4", 80)
    with pytest.raises(outbound.OutboundRefused) as metadata:  # a wide network never opens the metadata service
        outbound.addresses_checked("169.254.169.254", 80)
    assert metadata.value.reason == "metadata"
    settings.OUTBOUND_ALLOW = ["169.254.169.254"]  # only its own address does
    outbound.addresses_checked("169.254.169.254", 80)


def test_a_bad_allow_list_entry_is_an_operator_error(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.OUTBOUND_ALLOW = ["10.0.0.0/8", "127.0.0.1:http"]
    with pytest.raises(ImproperlyConfigured, match="OUTBOUND_ALLOW"):
        outbound.addresses_checked("8.8.8.8", 80)


def test_a_name_is_judged_by_every_address_it_resolves_to(monkeypatch: Any) -> None:
    fake_dns(monkeypatch, {"api.example.test": [["93.184.215.14"]],
                           "internal.example.test": [["127.0.0.1"]],
                           "both.example.test": [["93.184.215.14", "10.0.0.7"]],
                           "nothing.example.test": [[]]})
    outbound.url_check("https://api.example.test/v1")
    with pytest.raises(outbound.OutboundRefused) as loopback:
        outbound.url_check("http://internal.example.test:8080/v1")
    assert (loopback.value.reason, loopback.value.address) == ("loopback", "127.0.0.1")
    with pytest.raises(outbound.OutboundRefused) as mixed:
        outbound.url_check("https://both.example.test/v1")
    assert mixed.value.reason == "private"
    with pytest.raises(outbound.OutboundRefused) as unresolvable:
        outbound.url_check("https://nothing.example.test/v1")
    assert unresolvable.value.reason == "unresolvable"


@pytest.mark.parametrize("url", [
    "http://localhost:8080/v1", "http://2130706433:8080/v1", "http://0x7f000001/v1", "http://127.1/v1",
    "http://[::ffff:127.0.0.1]:8080/v1", "http://[::1]/v1",
])
def test_loopback_in_any_spelling_is_loopback(url: str) -> None:
    """Names and the decimal, hex and short forms the system resolver accepts are judged by the address."""
    with pytest.raises(outbound.OutboundRefused) as refused:
        outbound.url_check(url)
    assert refused.value.reason == "loopback"


def test_a_connection_to_an_internal_service_is_refused_before_a_byte_is_sent(internal: Listener) -> None:
    with outbound.http_client(timeout=2) as client, pytest.raises(httpx.ConnectError) as refused:
        client.post(f"{internal.url}/internal-admin/v1/chat/completions", json={})
    assert outbound.refusal_in(refused.value).reason == "loopback"
    assert internal.hits == []
    assert Listener.BANNER not in str(refused.value)


def test_the_operator_allow_list_opens_one_internal_service(internal: Listener, settings: Any) -> None:
    settings.OUTBOUND_ALLOW = [f"127.0.0.1:{internal.port}"]
    with outbound.http_client(timeout=2) as client:
        assert client.get(f"{internal.url}/ok").status_code == 200
    assert internal.hits == ["GET /ok"]
    with outbound.http_client(timeout=2, extra_allow=[]) as client:  # still checked on each connection
        settings.OUTBOUND_ALLOW = []
        with pytest.raises(httpx.ConnectError):
            client.get(f"{internal.url}/again")
    assert internal.hits == ["GET /ok"]


def test_a_name_that_changes_its_answer_after_the_check_is_caught_at_connect(internal: Listener,
                                                                             monkeypatch: Any) -> None:
    """DNS rebinding: public when the URL is saved, loopback when the connection is made."""
    fake_dns(monkeypatch, {"rebind.example.test": [["93.184.215.14"], ["127.0.0.1"]]})
    url = f"http://rebind.example.test:{internal.port}/v1/chat/completions"
    outbound.url_check(url)  # the save-time check sees a public address
    with outbound.http_client(timeout=2) as client, pytest.raises(httpx.ConnectError) as refused:
        client.post(url, json={})
    assert outbound.refusal_in(refused.value).address == "127.0.0.1"
    assert internal.hits == []


def test_the_connection_goes_to_the_address_that_was_checked(internal: Listener, monkeypatch: Any,
                                                              settings: Any) -> None:
    """A name the system cannot resolve (.invalid) still reaches the checked address: nothing resolves twice."""
    fake_dns(monkeypatch, {"model.invalid": [["127.0.0.1"]]})
    settings.OUTBOUND_ALLOW = [f"127.0.0.1:{internal.port}"]
    with outbound.http_client(timeout=2) as client:
        answer = client.get(f"http://model.invalid:{internal.port}/checked")
    assert answer.status_code == 200 and internal.hits == ["GET /checked"]


def test_a_redirect_to_an_internal_service_is_not_followed(internal: Listener, settings: Any) -> None:
    """An allowed server (127.0.0.1:port) sends the client to an internal one (127.0.0.2): no hop reaches it."""
    hidden = Listener("127.0.0.2")
    bouncer = Listener(redirect_to=f"{hidden.url}/internal-admin")
    try:
        settings.OUTBOUND_ALLOW = [f"127.0.0.1:{bouncer.port}"]
        with outbound.http_client(timeout=2) as client:
            answer = client.post(f"{bouncer.url}/v1/chat/completions", json={})
        assert answer.status_code == 307 and bouncer.hits and hidden.hits == []
        # A client that does follow redirects still meets the rule on the next hop.
        with httpx.Client(transport=outbound.GuardedTransport(), follow_redirects=True, timeout=2) as client, \
                pytest.raises(httpx.ConnectError) as refused:
            client.get(f"{bouncer.url}/v1/models")
        assert outbound.refusal_in(refused.value).address == "127.0.0.2"
        assert hidden.hits == []
    finally:
        hidden.stop()
        bouncer.stop()
