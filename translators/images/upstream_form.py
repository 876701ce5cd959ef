"""An edit as it goes upstream: the text fields (the model under the upstream's id), then the files
streamed from their spools, in the order they came (``gateway.api.wire.multipart_form``)."""

from __future__ import annotations

from gateway.api import InvalidRequest, UpstreamCall
from gateway.api.wire import FilePart, multipart_form
from translators.images.fields import ImageParams, check_params, form_bool, form_int
from translators.images.upload import EditUpload

_ACTED_ON = ("model", "prompt", "n", "response_format", "size", "stream")


def parse_edit_fields(upload: EditUpload) -> ImageParams:
    """The edit's parameters from its text fields (a field the gateway acts on given twice: 400)."""
    seen: dict[str, str] = {}
    for name, value in upload.fields:
        if name in _ACTED_ON:
            if name in seen:
                raise InvalidRequest(f"Invalid value for `{name}`: the field is given more than once.",
                                     param=name)
            seen[name] = value
    return check_params(model=seen.get("model"), prompt=seen.get("prompt"), n=form_int("n", seen.get("n")),
                        response_format=seen.get("response_format"), size=seen.get("size"),
                        stream=form_bool("stream", seen.get("stream")))


def build_edit_call(path: str, upload: EditUpload, upstream_model: str) -> UpstreamCall:
    fields = [(name, upstream_model if name == "model" else value) for name, value in upload.fields]
    files = [FilePart(f.name, f.filename, f.content_type or "application/octet-stream", f.size, f.chunks)
             for f in upload.files]
    form = multipart_form(fields, files)
    return UpstreamCall(path=path, body=form.body(), headers=form.headers)
