"""Bad input to the Images API: a 400 in the OpenAI envelope naming the field, with its log row and
no charge, and never a call upstream; a model the endpoint cannot serve is refused by name."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from .conftest import PNG_1PX, START_NANO, Images

GOOD: dict[str, Any] = {"model": "img-sim", "prompt": "a cat"}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n": 0}, "n"),
        ({"n": 11}, "n"),
        ({"n": "two"}, "n"),
        ({"response_format": "png"}, "response_format"),
        ({"size": "huge"}, "size"),
        ({"size": "0x1024"}, "size"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": None}, "prompt"),
        ({"model": None}, "model"),
        ({"stream": True}, "stream"),
    ],
)
async def test_generation_field_refused(images: Images, change: dict[str, Any], field: str) -> None:
    body = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    with pytest.raises(openai.BadRequestError) as info:
        await images.client().post("/images/generations", body=body, cast_to=object)
    assert info.value.code == "invalid_request"
    assert info.value.param == field and f"`{field}`" in info.value.message
    assert await images.upstream_calls() == []
    (log,) = await images.logs()
    assert (log["status"], log["charge_nano"]) == (400, 0)
    assert await images.balance() == START_NANO


async def test_generation_body_not_an_object(images: Images) -> None:
    with pytest.raises(openai.BadRequestError):
        await images.client().post("/images/generations", body=["a cat"], cast_to=object)
    assert await images.upstream_calls() == []


async def test_edit_with_a_file_that_is_no_image(images: Images) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await images.client().images.edit(
            model="img-sim", image=("cat.png", b"%PDF-1.7 not a png", "image/png"), prompt="add a hat"
        )
    assert info.value.param == "image" and "PNG, JPEG or WebP" in info.value.message
    assert await images.upstream_calls() == []
    (log,) = await images.logs()  # a refusal's log row, naming its code
    assert (log["route"], log["status"], log["error_code"], log["charge_nano"]) == (
        "/v1/images/edits",
        400,
        "invalid_request",
        0,
    )


async def test_edit_mask_that_is_no_image(images: Images) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await images.client().images.edit(
            model="img-sim",
            image=("a.png", PNG_1PX, "image/png"),
            mask=("m.png", b"", "image/png"),
            prompt="add a hat",
        )
    assert info.value.param == "mask"
    assert await images.upstream_calls() == []


async def test_edit_n_out_of_range(images: Images) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await images.client().images.edit(
            model="img-sim", image=("a.png", PNG_1PX, "image/png"), prompt="add a hat", n=20
        )
    assert info.value.param == "n"
    assert await images.upstream_calls() == []


async def _raw_form(images: Images, form: aiohttp.FormData) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            images.gw.base_url + "/v1/images/edits",
            data=form,
            headers={"Authorization": f"Bearer {images.key}"},
        ) as resp,
    ):
        return resp.status, await resp.json()


async def test_edit_form_errors_name_the_field(images: Images) -> None:
    no_image = aiohttp.FormData(default_to_multipart=True)
    no_image.add_field("model", "img-sim")
    no_image.add_field("prompt", "a hat")
    status, body = await _raw_form(images, no_image)
    assert status == 400 and body["error"]["param"] == "image"

    stray = aiohttp.FormData()
    stray.add_field("model", "img-sim")
    stray.add_field("prompt", "a hat")
    stray.add_field("image", PNG_1PX, filename="a.png", content_type="image/png")
    stray.add_field("photo", PNG_1PX, filename="b.png", content_type="image/png")
    status, body = await _raw_form(images, stray)
    assert status == 400 and body["error"]["param"] == "photo"

    twice = aiohttp.FormData()
    twice.add_field("model", "img-sim")
    twice.add_field("model", "img-sim")
    twice.add_field("prompt", "a hat")
    twice.add_field("image", PNG_1PX, filename="a.png", content_type="image/png")
    status, body = await _raw_form(images, twice)
    assert status == 400 and body["error"]["param"] == "model"
    assert await images.upstream_calls() == []
    assert await images.balance() == START_NANO


async def test_model_priced_by_tokens_is_not_served_as_images(images: Images) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        await images.client().images.generate(model="sim-chat", prompt="a cat")
    assert info.value.param == "model" and "sim-chat" in info.value.message
    assert await images.upstream_calls() == []


async def test_unknown_model_is_404(images: Images) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        await images.client().images.generate(model="no-such-model", prompt="a cat")
    assert info.value.code == "model_not_found"


async def test_wrong_key_is_401(images: Images) -> None:
    with pytest.raises(openai.AuthenticationError):
        await images.client("sk-wrong").images.generate(model="img-sim", prompt="a cat")
    with pytest.raises(openai.AuthenticationError):
        await images.client("sk-wrong").images.edit(
            model="img-sim", image=("a.png", PNG_1PX, "image/png"), prompt="a hat"
        )
    assert await images.upstream_calls() == []


async def test_an_answer_cut_half_way_is_a_502_and_costs_nothing(images: Images) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        await images.client().images.generate(model="img-cut", prompt="a cat", n=2)
    assert info.value.status_code == 502 and info.value.code == "upstream_error"
    logs = await images.logs()
    assert [(row["status"], row["charge_nano"]) for row in logs] == [(502, 0)]
    await images.books_balance()
    assert await images.balance() == START_NANO
