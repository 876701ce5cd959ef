"""Keeping credentials out of what the gateway shows: logs, CLI output, admin answers and the
upstream errors relayed to clients. One place decides what a credential looks like:

* ``is_credential_name``: a query parameter or header name that carries one (``key``, ``api_key``,
  ``token``, ``sig``, ``Authorization``, ...), read as a server would read it (percent-escapes
  decoded, any case, NULs, blanks and brackets ignored), so that ``?k%00ey=`` or ``?API%5FKEY=``
  are caught like ``?key=``;
* ``redact_query`` and ``redact_url``: a query string or URL with credential values and URL
  userinfo replaced by ``PLACEHOLDER``, for anything printed or logged;
* ``SecretScrubber``: every secret of a config (upstream keys, base URL credentials, credential
  headers) plus ``Bearer``/``Basic`` credentials, replaced in an upstream's text before it reaches
  a client; ``scrub_secrets`` uses the scrubber of the gateway serving the current request;
* ``without_empty_credentials``: the credential headers of an upstream call minus empty ones, so
  that an upstream with no ``api_key`` is not sent ``Authorization: Bearer `` over the basic
  auth of its URL.
"""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

from gateway.runtime.observe import TextScrubber, current_scope
from gateway.settings.schema import Config, UpstreamConfig

__all__ = ["ERROR_MESSAGE_CHARS", "PLACEHOLDER", "SecretScrubber", "is_credential_name", "loggable_message",
           "redact_query", "redact_url", "scrub_secrets", "upstream_secrets", "without_empty_credentials"]

PLACEHOLDER = "REDACTED"
# Parts of a name that mark a credential: key (api_key, a vendor's key header), token (access_token),
# sig (signature, X-Amz-Signature), secret, pass (password, passwd), auth (Authorization),
# credential, session and cookie. Matching more than needed only ever hides a harmless value.
_CREDENTIAL_WORDS = ("key", "token", "sig", "secret", "pass", "auth", "credential", "session", "cookie")
# What a server skips or folds when it reads a name: controls (NUL), blanks and the brackets of
# ``key[]``; letters are compared case-folded after NFKC (full-width letters are plain ones).
_NAME_NOISE = re.compile(r"[\x00-\x20\x7f\[\]]+")
_UNQUOTE_ROUNDS = 3  # ``%256Bey`` is ``%6Bey`` to a reader that decodes twice: decode until stable
MIN_SECRET_CHARS = 4  # shorter "secrets" would blank common words out of every message
# A credential of an HTTP auth scheme written out in a text (``Authorization: Bearer sk-...``
# echoed back): the scheme stays, the credential goes. Words that merely follow the scheme's name
# ("Bearer token", "basic usage") are told apart in ``_replacement``.
_SCHEME_CREDENTIAL = r"(?P<scheme>\b(?i:bearer|basic)[ \t]+)(?P<credential>[A-Za-z0-9\-._~+/]+=*)"
_EMPTY_CREDENTIALS = frozenset({"", "bearer", "basic"})


def _plain_name(raw: str) -> str:
    name = raw
    for _ in range(_UNQUOTE_ROUNDS):
        decoded = unquote_plus(name, errors="replace")
        if decoded == name:
            break
        name = decoded
    return unicodedata.normalize("NFKC", _NAME_NOISE.sub("", name)).casefold()


def is_credential_name(raw: str) -> bool:
    """True when ``raw`` (a query parameter or header name, as written) names a credential."""
    name = _plain_name(raw)
    return any(word in name for word in _CREDENTIAL_WORDS)


def redact_query(query: str) -> str:
    """``query`` with the value of every credential parameter (``is_credential_name``) replaced by
    ``PLACEHOLDER``; everything else as it was. Split on ``&`` and ``;`` (no separator to some
    readers, but splitting on it too only ever redacts more); a piece whose ``=`` is itself
    percent-encoded (``key%3Dsecret``) goes whole."""
    pieces = re.split(r"([&;])", query)
    for i in range(0, len(pieces), 2):
        name, eq, _ = pieces[i].partition("=")
        if eq:
            if is_credential_name(name):
                pieces[i] = f"{name}={PLACEHOLDER}"
        else:
            plain = _plain_name(name)
            if "=" in plain and is_credential_name(plain.partition("=")[0]):
                pieces[i] = PLACEHOLDER
    return "".join(pieces)


def redact_url(url: str) -> str:
    """``url`` as it may be printed: userinfo (``user:pass@``) and credential query values (and
    fragment values, where some put tokens) replaced by ``PLACEHOLDER``."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL at all (a stray bracket): nothing of it is shown
        return f"<unparseable URL: {PLACEHOLDER}>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{PLACEHOLDER}@{netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, redact_query(parts.query),
                       redact_query(parts.fragment)))


def _url_secrets(url: str) -> list[str]:
    """The credentials written in ``url``: its userinfo (user, password, both, and both as a
    Basic credential) and the values of its credential query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        plain = f"{unquote(user)}:{unquote(password)}"
        found += [userinfo, user, password, unquote(user), unquote(password), plain,
                  base64.b64encode(plain.encode()).decode()]
    for piece in re.split(r"[&;]", f"{parts.query}&{parts.fragment}"):
        name, eq, value = piece.partition("=")
        if eq and is_credential_name(name):
            found += [value, unquote_plus(value)]
    return found


def upstream_secrets(upstream: UpstreamConfig) -> list[str]:
    """What an upstream entry holds that must never be shown: its ``api_key``, the credentials
    in its ``base_url``, and the values of its credential ``headers`` (with and without the
    auth scheme: ``Bearer x`` and ``x``)."""
    found = [upstream.api_key, *_url_secrets(upstream.base_url)]
    for name, value in upstream.headers.items():
        if is_credential_name(name):
            found += [value, value.strip().partition(" ")[2].strip()]
    return found


def _forms(secret: str) -> set[str]:
    """``secret`` as an upstream may quote it back: as it is and percent-encoded."""
    return {secret, quote(secret, safe=""), quote_plus(secret)}


class SecretScrubber:
    """Replaces given secrets (in any of their ``_forms``), then any ``Bearer``/``Basic``
    credential, in a text by ``PLACEHOLDER``. Built once per config (a compiled pattern); used on
    error paths only."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for secret in secrets if len(secret.strip()) >= MIN_SECRET_CHARS
                 for form in _forms(secret.strip())}
        # Longest first: a secret that contains another goes whole.
        literal = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
        self._secrets = re.compile(literal) if literal else None

    @classmethod
    def of_config(cls, config: Config) -> SecretScrubber:
        """The scrubber of every upstream secret of ``config``."""
        return cls(secret for upstream in config.upstreams for secret in upstream_secrets(upstream))

    def scrub(self, text: str) -> str:
        if self._secrets is not None:
            text = self._secrets.sub(PLACEHOLDER, text)
        return _SCHEME_PATTERN.sub(_scheme_replacement, text)


_SCHEME_PATTERN = re.compile(_SCHEME_CREDENTIAL)


def _scheme_replacement(match: re.Match[str]) -> str:
    scheme, credential = match["scheme"], match["credential"]
    if scheme.strip().casefold() == "basic":
        secret = _is_basic_credential(credential)
    else:  # keys and tokens are long and hold digits; a word after "Bearer" is short or holds none
        secret = len(credential) >= 8 and (len(credential) >= 20 or any(c.isdigit() for c in credential))
    return f"{scheme}{PLACEHOLDER}" if secret else match[0]


def _is_basic_credential(credential: str) -> bool:
    """True when ``credential`` is base64 of ``user:password`` (not the word after "basic")."""
    try:
        return b":" in base64.b64decode(credential, validate=True)
    except ValueError:
        return False


_SCHEMES_ONLY = SecretScrubber(())


def scrub_secrets(text: str) -> str:
    """``text`` (an upstream's words on their way to a client) scrubbed by the scrubber of the
    gateway serving the current request (``RequestScope.scrubber``, set by the edge middleware);
    outside a request only auth-scheme credentials are recognised."""
    scope = current_scope()
    scrubber = scope.scrubber if scope is not None and scope.scrubber is not None else _SCHEMES_ONLY
    return scrubber.scrub(text)


ERROR_MESSAGE_CHARS = 1000  # a request-log row's error message: enough for any upstream's sentence


def loggable_message(text: str | None, scrubber: TextScrubber | None = None) -> str | None:
    """An error message as the request log keeps it: scrubbed (by ``scrubber``, else the current
    request's) and capped at ``ERROR_MESSAGE_CHARS``; None stays None."""
    if not text:
        return None
    scrubbed = scrubber.scrub(text) if scrubber is not None else scrub_secrets(text)
    return scrubbed[:ERROR_MESSAGE_CHARS]


def without_empty_credentials(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` without the credential headers that carry nothing (``Authorization: Bearer ``,
    a vendor's key header with no value): an upstream configured with no ``api_key`` is sent no
    credential of its protocol, so that the basic auth of its ``base_url``'s userinfo applies."""
    return {name: value for name, value in headers.items()
            if not (value.strip().casefold() in _EMPTY_CREDENTIALS and is_credential_name(name))}
