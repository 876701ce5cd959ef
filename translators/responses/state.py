"""Conversation state owned by the gateway: stored turns in the core's document store.

A turn (``store: true``) is one document of kind ``response``, owned by the caller's user: this
turn's input items as the client sent them, the response object as returned (its ``output`` is the
turn's output items), and the ``previous_response_id`` it continued. A follow-up rebuilds the whole
conversation by walking that chain back to its first turn, so every upstream, whatever its
protocol, is sent the full input; no upstream ever sees an id it did not issue.

The turn is written (one committed transaction) before the response completes: a follow-up sent
the instant the client has the answer finds it, on any replica sharing the database.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from gateway.api import InvalidRequest, NotFound
from gateway.api.accounts import Document, Storage

Json = dict[str, Any]
KIND = "response"
MAX_TURNS = 1000  # a longer chain is refused rather than walked


class StoredTurn(msgspec.Struct):
    previous_response_id: str | None
    input: list[Json]
    response: Json

    @property
    def output(self) -> list[Json]:
        output = self.response.get("output")
        return output if isinstance(output, list) else []


_decoder = msgspec.json.Decoder(StoredTurn)


async def save_turn(storage: Storage, user_id: int, turn: StoredTurn) -> None:
    doc_id = turn.response["id"]
    await storage.put_document(
        Document(kind=KIND, id=doc_id, user_id=user_id, body=msgspec.json.encode(turn).decode())
    )


async def load_turn(storage: Storage, user_id: int, response_id: str) -> StoredTurn | None:
    """The caller's stored turn; None when unknown, deleted, or another user's (alike, so that
    nobody learns whether someone else's id exists)."""
    doc = await storage.get_document(KIND, response_id)
    if doc is None or doc.user_id != user_id:
        return None
    return _decoder.decode(doc.body)


async def get_turn(storage: Storage, user_id: int, response_id: str) -> StoredTurn:
    turn = await load_turn(storage, user_id, response_id)
    if turn is None:
        raise NotFound(f"No response with id '{response_id}' was found.")
    return turn


async def conversation(storage: Storage, user_id: int, previous_id: str) -> list[Json]:
    """Every item of the chain ending at ``previous_id`` (oldest first: each turn's input, then
    its output); 400 naming ``previous_response_id`` when any turn of it is not the caller's to use."""
    turns = await _chain(storage, user_id, previous_id, strict=True)
    return [item for turn in reversed(turns) for item in (*turn.input, *turn.output)]


async def _chain(storage: Storage, user_id: int, start: str, *, strict: bool) -> list[StoredTurn]:
    turns: list[StoredTurn] = []
    next_id: str | None = start
    while next_id is not None:
        turn = await load_turn(storage, user_id, next_id)
        if turn is None or len(turns) >= MAX_TURNS:
            if not strict:
                break
            why = "" if next_id == start else f" (its conversation includes '{next_id}', which is gone)"
            raise InvalidRequest(
                f"Previous response with id '{start}' not found{why}. Only responses "
                "created with `store: true` by the same user can be continued.",
                param="previous_response_id",
            )
        turns.append(turn)
        next_id = turn.previous_response_id
    return turns


async def input_items(storage: Storage, user_id: int, turn: StoredTurn) -> list[Json]:
    """What the model was given for ``turn``: the earlier turns' items and this turn's input (as far
    back as the chain is still stored), oldest first, each with an ``id``."""
    earlier = (
        await _chain(storage, user_id, turn.previous_response_id, strict=False)
        if turn.previous_response_id
        else []
    )
    items: list[Json] = []
    for t in [*reversed(earlier), turn]:
        for n, item in enumerate(t.input):
            items.append(item if item.get("id") else {"id": _item_id(t.response["id"], n), **item})
        if t is not turn:
            items.extend(t.output)
    return items


def _item_id(response_id: str, n: int) -> str:
    """A stable id for an input item the client sent without one."""
    return "msg_" + hashlib.sha256(f"{response_id}:{n}".encode()).hexdigest()[:48]
