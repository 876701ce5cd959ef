"""Field rules of a music submission (spec 4.12), each violation a 400 naming the field.

Choices where the spec is silent: ``prompt`` at most 3000 characters, ``lyric`` 5000 (an upstream
may allow fewer: its "lyrics too long" failure is refunded), ``tags`` 1000, ``title`` 200;
``make_instrumental`` excludes ``lyric``; ``continue_at`` (seconds, >= 0, within the clip when its
length is known) and ``continue_clip_id`` (a clip of one of the caller's finished tasks) come
together.
"""

from __future__ import annotations

from gateway.api import InvalidRequest
from translators.music.wire import SubmitBody

MAX_PROMPT, MAX_LYRIC, MAX_TAGS, MAX_TITLE, MAX_HOOK = 3000, 5000, 1000, 200, 2048


def bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid value for `{field}`: {why}.", param=field)


def _text(value: str | None, field: str, most: int) -> str | None:
    if value is None:
        return None
    if len(value) > most:
        raise bad(field, f"at most {most} characters")
    return value


def check(body: SubmitBody) -> SubmitBody:
    """``body`` with its texts trimmed to what goes upstream; a 400 for the first broken rule."""
    prompt = body.prompt.strip()
    if not prompt:
        raise bad("prompt", "a non-empty description of the music is required")
    _text(prompt, "prompt", MAX_PROMPT)
    _text(body.tags, "tags", MAX_TAGS)
    _text(body.title, "title", MAX_TITLE)
    _text(body.lyric, "lyric", MAX_LYRIC)
    if body.make_instrumental and (body.lyric or "").strip():
        raise bad("lyric", "an instrumental (`make_instrumental`) has no lyrics")
    if body.model is not None and not body.model.strip():
        raise bad("model", "a model id, or leave it out")
    if (body.continue_at is None) != (body.continue_clip_id is None):
        missing = "continue_clip_id" if body.continue_clip_id is None else "continue_at"
        raise bad(missing, "a continuation needs both `continue_at` and `continue_clip_id`")
    if body.continue_at is not None and not body.continue_at >= 0:
        raise bad("continue_at", "a second from 0")
    hook = (body.notify_hook or "").strip() or None
    if hook is not None and len(hook) > MAX_HOOK:
        raise bad("notify_hook", f"at most {MAX_HOOK} characters")
    return SubmitBody(prompt=prompt, tags=body.tags, title=body.title, lyric=body.lyric, model=body.model,
                      make_instrumental=body.make_instrumental, continue_at=body.continue_at,
                      continue_clip_id=body.continue_clip_id, notify_hook=hook)
