"""Opaque reasoning state across wire formats: thinking signatures and redacted thinking (message
protocol), thought signatures (v1beta), encrypted reasoning items (Responses API).

Such state means something only to the protocol whose upstream issued it, and that upstream wants
it back exactly as issued (a message-protocol upstream also wants the very thinking text the
signature covers). ``ThinkingPart.origin`` names the issuing protocol. A client of the same family
gets the state as issued; a client of another family gets it sealed: standard base64 of a tagged
envelope holding the issuing protocol, the state and the text it covers. That is valid wherever a
format wants base64 bytes (v1beta ``thoughtSignature``) or an opaque string, and when the client
sends it back ``from_client`` restores exactly what the upstream issued, text included, even when
the client never saw or kept the text. An upstream only ever receives its own protocol's state.
"""

from __future__ import annotations

import base64
import binascii

import msgspec

from gateway.relay.canonical import ThinkingPart

# The envelope starts with these bytes, so every sealed value starts with SEALED_PREFIX.
_MAGIC = b"\x00gwrs1\x00"
SEALED_PREFIX = base64.b64encode(_MAGIC[:6]).decode()  # "AGd3cnMx"
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")


class Sealed(msgspec.Struct, omit_defaults=True):
    origin: str
    signature: str | None = None
    data: str | None = None  # redacted thinking
    text: str = ""


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Sealed)


def seal(part: ThinkingPart) -> str:
    envelope = Sealed(origin=part.origin or "", signature=None if part.redacted else part.signature,
                      data=part.data if part.redacted else None, text="" if part.redacted else part.text)
    return base64.b64encode(_MAGIC + _encoder.encode(envelope)).decode()


def unseal(value: str) -> Sealed | None:
    """The envelope a sealed value holds (either base64 alphabet, padded or not); None for any
    other value, which is then the client family's own state."""
    if not value.startswith(SEALED_PREFIX) and not value.startswith(SEALED_PREFIX.translate(
            str.maketrans("+/", "-_"))):
        return None
    text = value.translate(_URLSAFE_TO_STANDARD)
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        return _decoder.decode(raw[len(_MAGIC):]) if raw.startswith(_MAGIC) else None
    except (binascii.Error, ValueError, msgspec.DecodeError):
        return None


def holds_sealed(body: bytes) -> bool:
    """Whether a client's request may hold sealed state (a conversation moved from a model of
    another format): a same-format upstream must then get the translated request, which restores
    or leaves out each piece, not the client's bytes. The prefix reads the same in both alphabets."""
    return SEALED_PREFIX.encode() in body


def state_of(part: ThinkingPart) -> str | None:
    """The opaque state a part carries, as issued (its redacted data or its signature)."""
    return (part.data if part.redacted else part.signature) or None


def for_client(part: ThinkingPart, family: str) -> str | None:
    """What a client of ``family`` gets in the field for the part's opaque state: the state as
    issued when ``family`` issued it (or nobody is known to), sealed otherwise; None without state."""
    state = state_of(part)
    if state is None:
        return None
    return state if part.origin in (None, family) else seal(part)


def from_client(family: str, *, text: str = "", signature: str | None = None,
                data: str | None = None) -> ThinkingPart:
    """The thinking part a client of ``family`` sent back: a sealed value restored as its issuer
    made it, any other value taken as ``family``'s own."""
    value = data if data is not None else signature
    sealed = unseal(value) if value else None
    if sealed is None:
        if data is not None:
            return ThinkingPart(redacted=True, data=data, origin=family)
        return ThinkingPart(text=text, signature=signature or None, origin=family if signature else None)
    if sealed.data is not None:
        return ThinkingPart(redacted=True, data=sealed.data, origin=sealed.origin)
    return ThinkingPart(text=sealed.text, signature=sealed.signature, origin=sealed.origin)


def for_upstream(part: ThinkingPart, protocol: str) -> ThinkingPart | None:
    """What of ``part`` an upstream of ``protocol`` may receive: its own state as issued, never
    another protocol's (it would refuse the request): redacted thinking of another is left out,
    signed thinking of another goes as its text alone."""
    if part.origin in (None, protocol):
        return part
    if part.redacted:
        return None
    return ThinkingPart(text=part.text)
