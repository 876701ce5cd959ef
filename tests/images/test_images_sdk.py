"""The Images API through the official ``openai`` SDK, unchanged but for its base URL and key:
``images.generate`` and ``images.edit`` served by a ``chat``-protocol upstream, ``response_format``
relayed, ``per_image`` times the images that came back charged with a ledger row and a log row."""

from __future__ import annotations

import base64
from typing import Any

import aiohttp
import openai
import pytest

from .conftest import BACKUP_PER_IMAGE_NANO, PER_IMAGE_NANO, PNG_1PX, START_NANO, Images


async def test_generate_b64_json_is_relayed_and_charged_per_image(images: Images) -> None:
    raw = await images.client().images.with_raw_response.generate(
        model="img-sim", prompt="a lighthouse at dusk", response_format="b64_json"
    )
    answer = raw.parse()
    assert answer.data is not None and len(answer.data) == 1
    assert answer.data[0].b64_json is not None
    assert base64.b64decode(answer.data[0].b64_json).startswith(b"\x89PNG\r\n\x1a\n")
    sent = (await images.upstream_calls())[-1]
    assert sent["path"] == "/v1/images/generations"
    assert sent["body_json_or_null"]["model"] == "sim-image-1"  # the upstream's id for the model
    assert sent["body_json_or_null"]["response_format"] == "b64_json"
    assert sent["headers"]["authorization"] == "Bearer sk-sim"  # the upstream's key, not the client's
    request_id = raw.headers["x-service-request-id"]
    (log,) = await images.logs()
    assert (log["request_id"], log["route"], log["model"], log["status"]) == (
        request_id,
        "/v1/images/generations",
        "img-sim",
        200,
    )
    assert log["charge_nano"] == PER_IMAGE_NANO
    assert (
        next(row for row in images.ledger(request_id) if row["kind"] == "settle")["charge_nano"]
        == PER_IMAGE_NANO
    )
    assert await images.balance() == START_NANO - PER_IMAGE_NANO
    await images.books_balance()


async def test_generate_url_is_relayed(images: Images) -> None:
    answer = await images.client().images.generate(
        model="img-sim", prompt="a red kite", response_format="url"
    )
    assert answer.data is not None and answer.data[0].url is not None
    async with aiohttp.ClientSession() as http, http.get(answer.data[0].url) as resp:
        assert resp.status == 200 and (await resp.read()).startswith(b"\x89PNG")


async def test_n_3_is_charged_three_times_per_image(images: Images) -> None:
    raw = await images.client().images.with_raw_response.generate(
        model="img-sim", prompt="three cats", n=3, response_format="b64_json"
    )
    assert len(raw.parse().data or []) == 3
    (log,) = await images.logs()
    assert log["charge_nano"] == 3 * PER_IMAGE_NANO
    settles = [r for r in images.ledger(raw.headers["x-service-request-id"]) if r["kind"] == "settle"]
    assert settles and settles[0]["charge_nano"] == 3 * PER_IMAGE_NANO
    assert await images.balance() == START_NANO - 3 * PER_IMAGE_NANO
    await images.books_balance()


async def test_settled_on_the_images_that_came_back(images: Images) -> None:
    answer = await images.client().images.generate(model="img-sim", prompt="[[images:1]] a fox", n=4)
    assert len(answer.data or []) == 1
    (log,) = await images.logs()
    assert log["charge_nano"] == PER_IMAGE_NANO  # held for 4, charged for the 1 returned
    assert await images.balance() == START_NANO - PER_IMAGE_NANO
    await images.books_balance()


async def test_edit_with_an_uploaded_png_and_a_mask(images: Images) -> None:
    answer = await images.client().images.edit(
        model="img-sim",
        image=("in.png", PNG_1PX, "image/png"),
        mask=("mask.png", PNG_1PX, "image/png"),
        prompt="add a hat",
        n=2,
        response_format="b64_json",
    )
    assert answer.data is not None and len(answer.data) == 2
    # The simulator says what reached it: the image's bytes intact, and the mask.
    assert (
        answer.data[0].revised_prompt == f"edited 1 image(s) of {len(PNG_1PX)} bytes with a mask: add a hat"
    )
    sent = (await images.upstream_calls())[-1]
    assert sent["path"] == "/v1/images/edits"
    assert sent["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    (log,) = await images.logs()
    assert (log["route"], log["charge_nano"]) == ("/v1/images/edits", 2 * PER_IMAGE_NANO)
    assert await images.balance() == START_NANO - 2 * PER_IMAGE_NANO
    await images.books_balance()


async def test_edit_with_several_images(images: Images) -> None:
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 60
    answer = await images.client().images.edit(
        model="img-sim",
        image=[("a.png", PNG_1PX, "image/png"), ("b.jpg", jpeg, "image/jpeg")],
        prompt="merge them",
    )
    assert answer.data is not None
    assert (
        answer.data[0].revised_prompt == f"edited 2 image(s) of {len(PNG_1PX)}+{len(jpeg)} bytes: merge them"
    )
    (log,) = await images.logs()
    assert log["charge_nano"] == PER_IMAGE_NANO


async def test_wildcard_model_priced_by_its_pattern(images: Images) -> None:
    await images.client().images.generate(model="img/anything", prompt="a boat", n=2)
    sent = (await images.upstream_calls())[-1]
    assert sent["body_json_or_null"]["model"] == "anything"
    (log,) = await images.logs()
    assert log["charge_nano"] == 2 * 10_000_000


async def test_failover_to_the_next_upstream_then_failure_costs_nothing(images: Images) -> None:
    served = await images.client().images.generate(model="img-failover", prompt="a tree")
    assert len(served.data or []) == 1
    try:
        await images.client().images.generate(model="img-down", prompt="a tree")
        raise AssertionError("expected a 502")
    except openai.APIStatusError as err:
        assert err.status_code == 502 and err.code == "upstream_error"
    logs = await images.logs()
    assert [(row["model"], row["status"], row["charge_nano"]) for row in logs] == [
        ("img-failover", 200, PER_IMAGE_NANO),
        ("img-down", 502, 0),
    ]
    assert await images.balance() == START_NANO - PER_IMAGE_NANO
    await images.books_balance()


async def test_insufficient_quota_is_refused_before_the_upstream(images: Images) -> None:
    poor = await images.gw.create_user(quota_usd=0.05)
    key = (await images.gw.create_key(poor["id"], name="poor"))["key"]
    try:
        await images.client(key).images.generate(model="img-sim", prompt="two dogs", n=2)
        raise AssertionError("expected a 403")
    except openai.PermissionDeniedError as err:
        assert err.code == "insufficient_quota"
    assert await images.upstream_calls() == []
    served: Any = await images.client(key).images.generate(model="img-sim", prompt="one dog")
    assert len(served.data) == 1


async def test_a_fallback_serves_at_its_own_price_per_image(images: Images) -> None:
    allowed = ["img-primary", "img-tokened", "img-backup"]  # not img-locked
    key = (await images.gw.create_key(images.user_id, name="fallback", models=allowed))["key"]
    raw = await images.client(key).images.with_raw_response.generate(
        model="img-primary", prompt="[[images:2]] a bridge", n=3, response_format="b64_json"
    )
    assert raw.headers["x-gateway-fallback"] == "img-backup"
    assert len(raw.parse().data or []) == 2
    sent = (await images.upstream_calls())[-1]
    assert sent["body_json_or_null"]["model"] == "sim-image-2"  # the fallback's upstream id
    (log,) = await images.logs()
    assert (log["model"], log["charge_nano"]) == ("img-backup", 2 * BACKUP_PER_IMAGE_NANO)
    assert await images.balance() == START_NANO - 2 * BACKUP_PER_IMAGE_NANO
    await images.books_balance()


async def test_a_fallback_the_balance_cannot_hold_for_is_skipped(images: Images) -> None:
    # $0.15 covers 3 images of img-primary ($0.12) but not of img-backup ($0.30): nothing serves.
    poor = await images.gw.create_user(quota_usd=0.15)
    key = (await images.gw.create_key(poor["id"], name="poor", models=["img-primary", "img-backup"]))["key"]
    with pytest.raises(openai.APIStatusError) as info:
        await images.client(key).images.generate(model="img-primary", prompt="a bridge", n=3)
    assert info.value.status_code == 502
    await images.books_balance()
    user = await images.gw.gateway.storage.get_user(poor["id"])
    assert user is not None and (user.balance_nano, user.reserved_nano) == (150_000_000, 0)
