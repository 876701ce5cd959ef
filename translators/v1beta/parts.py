"""Content parts between the Gemini wire and the canonical model, both directions.

Three things need care:

* Function-call ids. Gemini's ``functionCall.id`` is optional and most models send none, while the
  other families key tool results by id. ``CallIds`` keeps the wire id when there is one and
  otherwise makes a deterministic ``call_<name>_<n>``, ``n`` being the call's position among all
  calls of the conversation; an id-less ``functionResponse`` takes the oldest unanswered call of
  the same name. An upstream answer continues the numbering after the request's calls, so ids
  never repeat within a conversation and re-sending the history reproduces them.
* Thought signatures. A ``thoughtSignature`` on a thought part stays on its ThinkingPart; one on
  any other part (a function call, a text) becomes an empty ThinkingPart just before it, and on the
  way out an empty signed ThinkingPart hands its signature to the part that follows, so the
  signature returns on the part it came with. Signatures read from a client are put back in the
  standard base64 alphabet (google-genai re-encodes them URL-safe). Another protocol's opaque state
  goes to a client sealed (``gateway.relay.reasoning_state``: valid base64, as the field must be) and is
  restored, with the text it signs, when the client sends it back; an upstream receives only
  signatures of its own protocol.
* Function responses. Gemini wants an object and the function ``name``; canonical tool results are
  text. ``{"result": "..."}`` style objects become their text and back; other objects travel as
  their JSON text and are parsed again on the way out.
"""

from __future__ import annotations

import mimetypes
import re
from typing import Any

import msgspec

from gateway.api import InvalidRequest
from gateway.api.canonical import (
    DocumentPart,
    ImagePart,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from gateway.api.relay import for_client, for_upstream, from_client
from gateway.api.wire import inline_data
from translators.v1beta import wire

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_RESULT_KEYS = ("result", "output", "content")
# google-genai holds signatures as bytes and sends them back URL-safe base64 encoded, whatever
# alphabet they came in: the standard alphabet restores what another vendor signed.
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")
PROTOCOL = "v1beta"


class CallIds:
    """Deterministic function-call ids (see module docstring)."""

    def __init__(self, start: int = 0) -> None:
        self.count = start
        self._pending: dict[str, list[str]] = {}
        self._unmatched = 0

    def call(self, name: str, wire_id: str | None) -> str:
        call_id = wire_id or f"call_{_ID_UNSAFE.sub('_', name)}_{self.count}"
        self.count += 1
        self._pending.setdefault(name, []).append(call_id)
        return call_id

    def response(self, name: str, wire_id: str | None) -> str:
        pending = self._pending.get(name, [])
        if wire_id:
            if wire_id in pending:
                pending.remove(wire_id)
            return wire_id
        if pending:
            return pending.pop(0)
        self._unmatched += 1
        return f"call_{_ID_UNSAFE.sub('_', name)}_unmatched_{self._unmatched}"


# --- wire -> canonical --------------------------------------------------------------------------


def _media_part(mime: str | None, data: str | None = None, url: str | None = None) -> Part:
    if mime is not None and mime.startswith("image/"):
        return ImagePart(url=url, media_type=mime, data=data)
    if mime is None and url is not None and (mimetypes.guess_type(url)[0] or "").startswith("image/"):
        return ImagePart(url=url, media_type=mimetypes.guess_type(url)[0])
    return DocumentPart(media_type=mime, data=data, url=url)


def response_text(response: dict[str, Any] | None) -> tuple[str, bool]:
    """A functionResponse's ``response`` object as tool-result text, and whether it is an error."""
    if not response:
        return "", False
    if len(response) == 1:
        key, value = next(iter(response.items()))
        if key == "error":
            return (value if isinstance(value, str) else msgspec.json.encode(value).decode()), True
        if key in _RESULT_KEYS and isinstance(value, str):
            return value, False
    return msgspec.json.encode(response).decode(), False


def to_canonical(parts: list[wire.Part], ids: CallIds, where: str | None) -> list[Part]:
    """One Content's parts. A client's (``where`` names it in errors, e.g. ``contents[2]``) must
    be well formed; an upstream answer's (``where`` None) loses the parts it cannot read."""
    out: list[Part] = []
    merging_thought = False  # the last canonical part is a ThinkingPart made from thought parts
    for j, part in enumerate(parts):
        signature = part.thoughtSignature.translate(_URLSAFE_TO_STANDARD) if part.thoughtSignature else None
        sealed = from_client(PROTOCOL, signature=signature) if signature and where is not None else None
        if sealed is not None and sealed.origin != PROTOCOL:
            # Another protocol's state, restored with the exact text it signs: the client's copy
            # of that text (the thought parts just before) is left out.
            last = out[-1] if out else None
            if merging_thought and isinstance(last, ThinkingPart) and not last.signature:
                out.pop()
            out.append(sealed)
            merging_thought = False
            if part.thought:
                continue
            signature = None
        if part.thought:
            text = part.text or ""
            last = out[-1] if out else None
            if merging_thought and isinstance(last, ThinkingPart) and not (signature and last.signature):
                # A streamed answer kept chunk by chunk is many thought parts: one thought here.
                last.text += text
                last.signature = last.signature or signature
            else:
                out.append(ThinkingPart(text=text, signature=signature))
            if signature and isinstance(out[-1], ThinkingPart):
                out[-1].origin = PROTOCOL
            merging_thought = True
            continue
        merging_thought = False
        if signature:
            out.append(ThinkingPart(signature=signature, origin=PROTOCOL))
        if part.text is not None:
            if part.text:
                out.append(TextPart(text=part.text))
        elif part.functionCall is not None:
            call = part.functionCall
            out.append(ToolCallPart(id=ids.call(call.name, call.id), name=call.name,
                                    arguments=msgspec.json.encode(call.args or {}).decode()))
        elif part.functionResponse is not None:
            fr = part.functionResponse
            text, is_error = response_text(fr.response)
            out.append(ToolResultPart(tool_call_id=ids.response(fr.name, fr.id), name=fr.name,
                                      content=[TextPart(text=text)] if text else [], is_error=is_error))
        elif part.inlineData is not None:
            if part.inlineData.data:
                out.append(_media_part(part.inlineData.mimeType, data=part.inlineData.data))
            elif where is not None:
                raise InvalidRequest(f"`{where}.parts[{j}].inlineData.data` is required.",
                                     param=f"{where}.parts[{j}].inlineData.data")
        elif part.fileData is not None:
            if part.fileData.fileUri:
                out.append(_media_part(part.fileData.mimeType, url=part.fileData.fileUri))
            elif where is not None:
                raise InvalidRequest(f"`{where}.parts[{j}].fileData.fileUri` is required.",
                                     param=f"{where}.parts[{j}].fileData.fileUri")
        elif part.executableCode is not None:
            code = part.executableCode
            out.append(TextPart(text=f"```{code.language.lower()}\n{code.code}\n```"))
        elif part.codeExecutionResult is not None:
            if part.codeExecutionResult.output:
                out.append(TextPart(text=part.codeExecutionResult.output))
        elif not signature and where is not None:
            raise InvalidRequest(f"`{where}.parts[{j}]` has no data: set one of `text`, `inlineData`, "
                                 "`fileData`, `functionCall` or `functionResponse`.",
                                 param=f"{where}.parts[{j}]")
    return out


# --- canonical -> wire --------------------------------------------------------------------------


def _tool_response(part: ToolResultPart) -> dict[str, Any]:
    text = "".join(p.text for p in part.content if isinstance(p, TextPart))
    if part.is_error:
        return {"error": text}
    if text.startswith("{"):
        try:
            parsed = msgspec.json.decode(text)
        except msgspec.DecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"result": text}


def parse_args(arguments: str) -> dict[str, Any]:
    try:
        parsed = msgspec.json.decode(arguments or "{}")
    except msgspec.DecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _media(part: ImagePart | DocumentPart) -> dict[str, Any] | None:
    default = "image/jpeg" if isinstance(part, ImagePart) else "application/pdf"
    if part.data:
        return {"inlineData": {"mimeType": part.media_type or default, "data": part.data}}
    if part.url:
        inline = inline_data(part.url)
        if inline is not None:
            mime = inline.media_type if inline.explicit_type else part.media_type or default
            return {"inlineData": {"mimeType": mime, "data": inline.data}}
        mime = part.media_type or mimetypes.guess_type(part.url)[0] or default
        return {"fileData": {"mimeType": mime, "fileUri": part.url}}
    if isinstance(part, DocumentPart) and part.text is not None:
        return {"text": part.text}
    return None


def tool_names(messages: list[Any]) -> dict[str, str]:
    """Call id -> function name over a conversation, to name id-only tool results."""
    return {p.id: p.name for m in messages for p in m.parts if isinstance(p, ToolCallPart)}


def _thought(part: ThinkingPart, client: bool) -> tuple[str, str | None] | None:
    """A thinking part's text and the signature it goes out with (None: it goes out not at all):
    for a client, another protocol's state sealed; for an upstream, only its own protocol's."""
    if client:
        return ("" if part.redacted else part.text), for_client(part, PROTOCOL)
    own = for_upstream(part, PROTOCOL)
    if own is None or own.redacted:
        return None  # an opaque payload of another vendor: nothing Gemini can take
    return own.text, own.signature


def to_wire(parts: list[Part], names: dict[str, str] | None = None,
            include_thoughts: bool = True, *, client: bool = False) -> list[dict[str, Any]]:
    """Canonical parts as Gemini parts, for a ``client``'s answer or else an upstream's request.
    ``names`` resolves tool results that carry no ``name``."""
    out: list[dict[str, Any]] = []
    signature: str | None = None  # from an empty signed ThinkingPart, for the next part
    for part in parts:
        item: dict[str, Any] | None = None
        extra: list[dict[str, Any]] = []
        if isinstance(part, ThinkingPart):
            thought = _thought(part, client)
            if thought is None:
                continue
            text, signed = thought
            if text and include_thoughts:
                item = {"text": text, "thought": True}
                if signed:
                    item["thoughtSignature"] = signed
            elif signed:
                signature = signed
                continue
            else:
                continue
        elif isinstance(part, TextPart):
            item = {"text": part.text}
        elif isinstance(part, ToolCallPart):
            item = {"functionCall": {"id": part.id, "name": part.name, "args": parse_args(part.arguments)}}
        elif isinstance(part, ToolResultPart):
            name = part.name or (names or {}).get(part.tool_call_id)
            if not name:
                raise InvalidRequest(f"The tool result for `{part.tool_call_id}` matches no earlier tool "
                                     "call, so its function name is unknown.", param="tool_call_id")
            item = {"functionResponse": {"id": part.tool_call_id, "name": name,
                                         "response": _tool_response(part)}}
            extra = [m for p in part.content if isinstance(p, ImagePart) and (m := _media(p)) is not None]
        elif isinstance(part, ImagePart | DocumentPart):
            item = _media(part)
        if item is None:
            continue
        if signature is not None:
            item["thoughtSignature"] = signature
            signature = None
        out.append(item)
        out.extend(extra)
    if signature is not None:
        out.append({"text": "", "thought": True, "thoughtSignature": signature})
    return out
