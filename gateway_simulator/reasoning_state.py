"""Opaque reasoning state as a simulated upstream issues it, and the check it makes when a client
hands it back, so that a test through the gateway proves the upstream got exactly what it issued.

A token is a fixed head (each side picks one in its vendor's shape), a nonce, some body bytes and a
MAC over all of them: any changed byte fails ``token_valid``, as a vendor refuses a state it cannot
verify. Each side encodes tokens as its wire wants them (base64, URL-safe base64).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

_KEY = b"gateway-simulator-reasoning-state"
_MAC_BYTES = 16
_NONCE_BYTES = 16


def _mac(kind: str, payload: bytes) -> bytes:
    return hmac.new(_KEY, kind.encode() + b"\x00" + payload, hashlib.sha256).digest()[:_MAC_BYTES]


def token(kind: str, head: bytes, body: bytes) -> bytes:
    """A new token of ``kind`` (a side's name for it) starting with ``head``."""
    payload = head + os.urandom(_NONCE_BYTES) + body
    return payload + _mac(kind, payload)


def token_valid(kind: str, raw: bytes | None, head: bytes) -> bool:
    if raw is None or not raw.startswith(head) or len(raw) < len(head) + _NONCE_BYTES + _MAC_BYTES:
        return False
    payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
    return hmac.compare_digest(mac, _mac(kind, payload))


def b64decode_any(value: str) -> bytes | None:
    """Base64 in either alphabet, padded or not; None when it is not base64."""
    text = value.translate(str.maketrans("-_", "+/"))
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
