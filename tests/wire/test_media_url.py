"""``gateway.wire.media_url``: which client media links count as public http(s) URLs (judged
without DNS), and base64 sizes without decoding."""

from __future__ import annotations

import base64

import pytest

from gateway.wire.media_url import MAX_URL_CHARS, base64_size, public_url_problem


@pytest.mark.parametrize("url", [
    "https://cdn.example.com/a.png", "http://example.com:8080/v.mp4?sig=1", "https://93.184.216.34/a",
    "https://[2606:4700::1111]/a", "HTTPS://Example.COM/a.mp3",
])
def test_public_links(url: str) -> None:
    assert public_url_problem(url) is None


@pytest.mark.parametrize(("url", "why"), [
    ("ftp://example.com/a", "http(s)"), ("file:///etc/passwd", "http(s)"), ("https:///nohost", "http(s)"),
    ("http://user:pw@example.com/", "credentials"), ("http://example.com:99999/", "not a valid URL"),
    ("http://localhost/a", "not a public host"), ("http://printer.local/a", "not a public host"),
    ("http://metadata.google.internal/", "not a public host"), ("http://intranet/", "not a public host"),
    ("http://127.0.0.1/a", "not a public address"), ("http://10.1.2.3/", "not a public address"),
    ("http://169.254.169.254/latest", "not a public address"), ("http://[::1]/", "not a public address"),
    ("http://[::ffff:192.168.0.1]/", "not a public address"), ("http://224.0.0.1/", "not a public address"),
    ("https://example.com/" + "a" * MAX_URL_CHARS, "at most"),
])
def test_refused_links(url: str, why: str) -> None:
    problem = public_url_problem(url)
    assert problem is not None and why in problem, problem


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 100, 1001])
def test_base64_size(size: int) -> None:
    assert base64_size(base64.b64encode(b"x" * size).decode()) == size
