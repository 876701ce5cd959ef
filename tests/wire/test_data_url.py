"""``gateway.wire.data_url``: RFC 2397 data URLs, well-formed, odd and hostile."""

from __future__ import annotations

import base64
import random

import orjson
import pytest

from gateway.relay.canonical import DocumentPart, ImagePart, TextPart
from gateway.runtime.errors import InvalidRequest
from gateway.wire.data_url import DataURL, DataURLError, data_url, inline_data, parse_data_url
from translators.chat.request import decode_chat_request
from translators.messages.upstream import _image as messages_image  # the adapter's image block
from translators.v1beta.parts import to_wire

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_base64_with_media_type_is_taken_as_is() -> None:
    url = f"data:image/png;base64,{PNG}"
    parsed = parse_data_url(url)
    assert parsed == DataURL(media_type="image/png", data=PNG)
    assert parsed is not None and parsed.content().startswith(b"\x89PNG")


@pytest.mark.parametrize(("url", "media_type", "explicit", "content", "params"), [
    # RFC 2397's own examples
    ("data:,A%20brief%20note", "text/plain", False, b"A brief note", (("charset", "US-ASCII"),)),
    ("data:text/plain;charset=iso-8859-7,%be%fg%be", "text/plain", True, b"\xbe%fg\xbe",
     (("charset", "iso-8859-7"),)),
    ("data:;base64,SGVsbG8=", "text/plain", False, b"Hello", (("charset", "US-ASCII"),)),
    # case, parameters, quoting, percent-encoded base64, whitespace, missing padding
    ("DATA:Image/PNG;BASE64,SGVsbG8=", "image/png", True, b"Hello", ()),
    ('data:text/plain;charset="utf-8";name=a%20b.txt,caf%C3%A9', "text/plain", True, "café".encode(),
     (("charset", "utf-8"), ("name", "a b.txt"))),
    ("data:application/octet-stream;base64,SGVsbG8%2B", "application/octet-stream", True,
     base64.b64decode("SGVsbG8+"), ()),
    ("data:application/octet-stream;base64,SGVsbA%3D%3D", "application/octet-stream", True, b"Hell", ()),
    ("data:text/plain;base64,SGVs\r\n bG8=", "text/plain", True, b"Hello", ()),
    ("data:text/plain;base64,SGVsbG8", "text/plain", True, b"Hello", ()),
    ("data:text/plain;foo;base64,SGVsbG8=", "text/plain", True, b"Hello", ()),
    ("data:image/svg+xml,%3Csvg%20xmlns%3D%22x%22%2F%3E", "image/svg+xml", True, b'<svg xmlns="x"/>', ()),
    ("data:text/plain,", "text/plain", True, b"", ()),
    ("data:text/plain,a,b", "text/plain", True, b"a,b", ()),
])
def test_rfc_2397_forms(url: str, media_type: str, explicit: bool, content: bytes,
                        params: tuple[tuple[str, str], ...]) -> None:
    parsed = parse_data_url(url)
    assert parsed is not None
    assert (parsed.media_type, parsed.explicit_type, parsed.content(), parsed.parameters) == (
        media_type, explicit, content, params)
    assert base64.b64encode(parsed.content()).decode() == parsed.data  # always standard padded base64


@pytest.mark.parametrize("url", ["https://x/y.png", "", "dat:,x", "file:///etc/passwd", " data:,x"])
def test_other_urls_are_not_data_urls(url: str) -> None:
    assert parse_data_url(url) is None and inline_data(url) is None


@pytest.mark.parametrize("url", [
    "data:image/png;base64",  # no comma
    "data:image;base64,SGVsbG8=",  # no subtype
    "data:image/png extra;base64,SGVsbG8=",
    "data:image/png;base64,SGV!bG8=",  # outside the alphabet
    "data:image/png;base64,SGVsbG8=x",  # data after padding
    "data:image/png;base64,SGVsb",  # impossible length
    "data:image/png;base64,SGVsbG8==",  # padding where none fits
    "data:image/png;base64,-_-_",  # URL-safe alphabet is not base64 here
    "data:image/png;base64,\udcff",
])
def test_malformed_data_urls_raise(url: str) -> None:
    with pytest.raises(DataURLError):
        parse_data_url(url)
    assert inline_data(url) is None  # an adapter passes it on as a link instead


def test_huge_payload_is_not_copied_or_decoded() -> None:
    payload = "QUJD" * 2_000_000  # 8 MB
    parsed = parse_data_url("data:image/png;base64," + payload)
    assert parsed is not None and parsed.data == payload


def test_random_garbage_never_escapes_as_another_error() -> None:
    rng = random.Random(5)
    alphabet = "data:;,=/+%base64 \r\n\tAZaz09\"'\\é\x00"
    for _ in range(3000):
        url = "data:" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        try:
            parsed = parse_data_url(url)
        except DataURLError:
            continue
        assert parsed is not None
        base64.b64decode(parsed.data, validate=True)  # whatever is accepted is valid base64


def test_data_url_formats_what_parse_reads() -> None:
    assert parse_data_url(data_url("image/webp", PNG)) == DataURL(media_type="image/webp", data=PNG)
    assert data_url(None, "") == "data:application/octet-stream;base64,"


# --- every family uses the one parser -------------------------------------------------------------


def chat_parts(url: str) -> list[object]:
    body = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url}}]}]})
    return list(decode_chat_request(body).messages[0].parts)


def test_chat_client_accepts_percent_encoded_and_typeless_data_urls() -> None:
    svg = chat_parts("data:image/svg+xml,%3Csvg%2F%3E")[1]
    assert svg == ImagePart(media_type="image/svg+xml", data=b64(b"<svg/>"))
    typeless = chat_parts(f"data:;base64,{PNG}")[1]
    assert typeless == ImagePart(data=PNG)  # no declared type: each upstream applies its own default


def test_chat_client_refuses_a_broken_data_url_naming_the_field() -> None:
    with pytest.raises(InvalidRequest) as info:
        chat_parts("data:image/png;base64,not base64!")
    assert info.value.param == "messages[0].content[1].image_url.url"


def test_upstream_adapters_inline_a_data_url_alike() -> None:
    url = "data:image/gif,GIF89a"
    part = ImagePart(url=url)
    messages = messages_image(part)
    assert messages["source"] == {"type": "base64", "media_type": "image/gif", "data": b64(b"GIF89a")}
    gemini = to_wire([TextPart("x"), part, DocumentPart(url="data:;base64,SGk=")])
    assert gemini[1] == {"inlineData": {"mimeType": "image/gif", "data": b64(b"GIF89a")}}
    assert gemini[2] == {"inlineData": {"mimeType": "application/pdf", "data": "SGk="}}
    broken = to_wire([ImagePart(url="data:image/png;base64,%%%")])
    assert broken == [{"fileData": {"mimeType": "image/png", "fileUri": "data:image/png;base64,%%%"}}]
