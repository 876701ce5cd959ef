"""The multipart body sent upstream: the validated fields, then the file streamed from its spool
(``gateway.api.wire.multipart_form``: sized, so the upstream gets a Content-Length)."""

from __future__ import annotations

from gateway.api import UpstreamCall
from gateway.api.wire import FilePart, multipart_form
from translators.audio.upload import Upload


def build_upload_call(path: str, fields: list[tuple[str, str]], upload: Upload) -> UpstreamCall:
    file = FilePart("file", upload.filename or "audio", upload.content_type or "application/octet-stream",
                    upload.size, upload.chunks)
    form = multipart_form(fields, [file])
    return UpstreamCall(path=path, body=form.body(), headers=form.headers)
