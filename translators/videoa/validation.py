"""The rules of a video-A submission (spec 4.10 and 8), each violation a 400 naming the field.

Choices where the spec is silent (documented in the package docstring too): ``duration`` is 1-30
seconds; ``videoa-1-5-pro`` follows the ``videoa-2-0`` family's reference and material rules (the
stricter set the spec gives); the ``videoa-2-0`` family has no per-item seconds limit (spec 8 gives
only combined ones); a reference-to-video task needs at least one reference.
"""

from __future__ import annotations

from fractions import Fraction

import msgspec

from translators.videoa.media import bad, check_media
from translators.videoa.wire import CleanInput, Input

MODELS = ("videoa-2-5", "videoa-2-0", "videoa-2-0-fast", "videoa-2-0-mini", "videoa-2-0-mini-enhanced",
          "videoa-1-5-pro")
GENERATION_TYPES = ("text-to-video", "image-to-video", "reference-to-video")
ASPECT_RATIOS = ("16:9", "4:3", "1:1", "3:4", "9:16", "21:9", "adaptive")
RESOLUTIONS = ("480p", "720p", "1080p")
MIN_DURATION, MAX_DURATION, DEFAULT_DURATION = 1, 30, 5
MAX_PROMPT = 10_000


class Limits(msgspec.Struct, frozen=True):
    """Material limits of a model family (spec 8); None: no such limit."""

    images: int
    videos: int
    audios: int
    total: int | None
    item_min_s: int | None  # per video/audio
    item_max_s: int | None
    combined_s: int  # per kind (videos together, audios together)
    audio_alone: bool  # audio may be the only reference (spec 4.10 rule 2)


LIMITS_2_5 = Limits(images=30, videos=10, audios=10, total=50, item_min_s=2, item_max_s=30, combined_s=30,
                    audio_alone=True)
LIMITS_2_0 = Limits(images=9, videos=3, audios=3, total=None, item_min_s=None, item_max_s=None, combined_s=15,
                    audio_alone=False)


def limits_of(model: str) -> Limits:
    return LIMITS_2_5 if model == "videoa-2-5" else LIMITS_2_0


def model(value: str) -> str:
    if value not in MODELS:
        raise bad("model", f"one of {', '.join(MODELS)}")
    return value


def _choice(value: str | None, field: str, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise bad(field, f"one of {', '.join(allowed)}")
    return value


def _text(value: str | None, field: str, *, required: bool) -> str:
    text = (value or "").strip()
    if required and not text:
        raise bad(field, "a non-empty string is required")
    if len(text) > MAX_PROMPT:
        raise bad(field, f"at most {MAX_PROMPT} characters")
    return text


def _not_here(values: list[str] | None, field: str, generation_type: str) -> None:
    if values:
        raise bad(field, f"not allowed for {generation_type} (reference media are for reference-to-video)")


def _media(values: list[str], field: str, kind: str, limits: Limits) -> list[str]:
    """Check each URL and the seconds limits of one kind; the URLs as given."""
    combined = Fraction(0)
    for i, url in enumerate(values):
        seconds = check_media(url, f"{field}[{i}]", kind)
        if seconds is None:
            continue  # a remote file (or a header without a duration): its seconds are the upstream's
        if limits.item_min_s is not None and limits.item_max_s is not None \
                and not limits.item_min_s <= seconds <= limits.item_max_s:
            raise bad(f"{field}[{i}]", f"each {kind} must last {limits.item_min_s}-{limits.item_max_s} s; "
                                       f"this one lasts {float(seconds):.2f} s")
        combined += seconds
    if combined > limits.combined_s:
        raise bad(field, f"the {kind}s may last {limits.combined_s} s together; these last "
                         f"{float(combined):.2f} s")
    return values


def _references(body: Input, model_id: str) -> tuple[list[str], list[str], list[str]]:
    limits = limits_of(model_id)
    images, videos, audios = body.image_urls or [], body.video_urls or [], body.audio_urls or []
    for values, field, most in ((images, "input.image_urls", limits.images),
                                (videos, "input.video_urls", limits.videos),
                                (audios, "input.audio_urls", limits.audios)):
        if len(values) > most:
            raise bad(field, f"{model_id} takes at most {most} here; got {len(values)}")
    total = len(images) + len(videos) + len(audios)
    if limits.total is not None and total > limits.total:
        raise bad("input.image_urls", f"{model_id} takes at most {limits.total} reference files in all; "
                                      f"got {total}")
    if total == 0:
        raise bad("input.image_urls", "reference-to-video needs at least one reference image, video or audio")
    if audios and not images and not videos and not limits.audio_alone:
        raise bad("input.audio_urls", f"{model_id} needs at least one reference image or video alongside "
                                      "audio")
    return (_media(images, "input.image_urls", "image", limits),
            _media(videos, "input.video_urls", "video", limits),
            _media(audios, "input.audio_urls", "audio", limits))


def clean_input(body: Input, model_id: str) -> CleanInput:
    """``body`` checked against every rule for ``model_id``, with the defaults filled in."""
    kind = _choice(body.generation_type, "input.generation_type", GENERATION_TYPES, "text-to-video")
    prompt = _text(body.prompt, "input.prompt", required=True)
    duration = DEFAULT_DURATION if body.duration is None else body.duration
    if not MIN_DURATION <= duration <= MAX_DURATION:
        raise bad("input.duration", f"whole seconds from {MIN_DURATION} to {MAX_DURATION}")
    aspect = _choice(body.aspect_ratio, "input.aspect_ratio", ASPECT_RATIOS, "adaptive")
    resolution = _choice(body.resolution, "input.resolution", RESOLUTIONS, "720p")
    negative = _text(body.negative_prompt, "input.negative_prompt", required=False) or None
    images: list[str] = []
    videos: list[str] = []
    audios: list[str] = []
    if kind == "text-to-video":
        for values, field in ((body.image_urls, "input.image_urls"), (body.video_urls, "input.video_urls"),
                              (body.audio_urls, "input.audio_urls")):
            if values:
                raise bad(field, "not allowed for text-to-video")
    elif kind == "image-to-video":
        _not_here(body.video_urls, "input.video_urls", kind)
        _not_here(body.audio_urls, "input.audio_urls", kind)
        images = body.image_urls or []
        if len(images) not in (1, 2):
            raise bad("input.image_urls", "image-to-video takes 1 image (the first frame) or 2 (first and "
                                          f"last frame); got {len(images)}")
        for i, url in enumerate(images):
            check_media(url, f"input.image_urls[{i}]", "image")
    else:
        images, videos, audios = _references(body, model_id)
    return CleanInput(prompt=prompt, generation_type=kind, duration=duration, aspect_ratio=aspect,
                      resolution=resolution, generate_audio=True if body.generate_audio is None
                      else body.generate_audio, image_urls=images, video_urls=videos, audio_urls=audios,
                      negative_prompt=negative)

