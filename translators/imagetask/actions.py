"""Follow-up actions on a finished image task: what a ``change``/``zoom``/``pan``/``modal`` request
or a button's ``customId`` asks for, that the earlier task has finished, and the buttons a finished
task offers. Whether an action fits the kind of the earlier task (a zoom of a grid, an upscale of an
upscale) is the upstream's to decide: its refusal reaches the client as an error.

A button's ``customId`` is the gateway's own (``imagetask::<kind>::<n>::<task id>``): it names the
gateway's task id, never the upstream's, and is turned back into an action here.
"""

from __future__ import annotations

import msgspec

from gateway.api import InvalidRequest
from gateway.api.tasks import TaskRecord
from translators.imagetask.wire import Button

GRID_ACTIONS = frozenset({"IMAGINE", "BLEND", "VARIATION", "REROLL", "ZOOM", "PAN", "MODAL"})
CHANGE_ACTIONS = ("UPSCALE", "VARIATION", "REROLL")
DIRECTIONS = ("LEFT", "RIGHT", "UP", "DOWN")
_PREFIX = "imagetask"


class FollowUp(msgspec.Struct, frozen=True):
    action: str  # UPSCALE | VARIATION | REROLL | ZOOM | PAN | MODAL
    index: int = 0  # 1-4 for UPSCALE / VARIATION
    detail: str = ""  # zoom factor, pan direction


def custom_id(kind: str, n: int, task_id: str) -> str:
    return f"{_PREFIX}::{kind}::{n}::{task_id}"


def parse_custom_id(value: str, task_id: str) -> FollowUp:
    """The action a button of task ``task_id`` stands for; 400 naming ``customId`` otherwise."""
    parts = value.split("::")
    if len(parts) != 4 or parts[0] != _PREFIX or not parts[2].isdigit():
        raise InvalidRequest("Invalid value for `customId`: not a button of an image task.", param="customId")
    _, kind, n_text, owner = parts
    if owner != task_id:
        raise InvalidRequest("Invalid value for `customId`: the button belongs to another task than "
                             "`taskId`.", param="customId")
    n = int(n_text)
    if kind in ("upsample", "variation") and 1 <= n <= 4:
        return FollowUp("UPSCALE" if kind == "upsample" else "VARIATION", index=n)
    if kind == "reroll":
        return FollowUp("REROLL")
    if kind == "zoom" and n in (50, 75):
        return FollowUp("ZOOM", detail="2" if n == 50 else "1.5")
    if kind.startswith("pan_") and kind[4:].upper() in DIRECTIONS:
        return FollowUp("PAN", detail=kind[4:].upper())
    raise InvalidRequest(f"Invalid value for `customId`: unknown button `{kind}`.", param="customId")


def check_parent(parent: TaskRecord) -> None:
    """A follow-up acts on a finished, successful task (400 otherwise). Its kind is not judged
    here: an upstream may allow what another refuses, and says so itself."""
    if parent.status != "SUCCESS":
        state = "failed" if parent.status == "FAILURE" else "not finished yet"
        raise InvalidRequest(f"Invalid value for `taskId`: the task `{parent.task_id}` has {state}; "
                             "follow-up actions need a finished task.", param="taskId")


def buttons(task: TaskRecord) -> list[Button]:
    """The follow-ups a task offers once it succeeded (none before, none for DESCRIBE)."""
    if task.status != "SUCCESS":
        return []
    tid = task.task_id
    if task.action in GRID_ACTIONS:
        out = [Button(custom_id("upsample", i, tid), "", f"U{i}", 2, 2) for i in range(1, 5)]
        out.append(Button(custom_id("reroll", 0, tid), "\U0001f504", "", 2, 2))
        out += [Button(custom_id("variation", i, tid), "", f"V{i}", 2, 2) for i in range(1, 5)]
        return out
    if task.action == "UPSCALE":
        out = [Button(custom_id("zoom", 50, tid), "\U0001f50d", "Zoom Out 2x", 2, 2),
               Button(custom_id("zoom", 75, tid), "\U0001f50d", "Zoom Out 1.5x", 2, 2)]
        arrows = {"LEFT": "\u2b05\ufe0f", "RIGHT": "\u27a1\ufe0f", "UP": "\u2b06\ufe0f",
                  "DOWN": "\u2b07\ufe0f"}
        out += [Button(custom_id(f"pan_{d.lower()}", 1, tid), arrows[d], "", 2, 2) for d in DIRECTIONS]
        return out
    return []
