"""Where a task side of the simulator reads its options: the words of the upstream credential
(pieces split on ``-``, e.g. ``sk-sim-dur300``) and the ``sim:<option>`` words of the prompt
(``a storm at sea sim:taskfail``). Each side parses the words it knows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from gateway_simulator.routing import SimVendor

__all__ = ["TaskOptions", "option_words"]

_PROMPT_OPTION = re.compile(r"\bsim:([a-z]+\d*)\b")
_DURATION = re.compile(r"^dur(\d+)$")


def option_words(side: SimVendor, request: web.Request, prompt: str) -> list[str]:
    """The credential's pieces, then the prompt's option words: applied in this order, a prompt
    option overrides one of the credential."""
    return [*side.extract_key(request).split("-"), *_PROMPT_OPTION.findall(prompt)]


@dataclass
class TaskOptions:
    """The options every task side knows: ``dur<MS>`` (how long a task runs), ``taskfail`` (it
    ends failed), ``forget`` (the upstream forgets it half-way), ``reject`` (the submission is
    refused). A side with more subclasses it and reads its own words in ``apply_word``."""

    duration_s: float = 8.0
    fail: bool = False
    forget: bool = False
    reject: bool = False

    def apply(self, words: Iterable[str]) -> None:
        for word in (w.strip().lower() for w in words):
            if match := _DURATION.match(word):
                self.duration_s = int(match.group(1)) / 1000.0
            elif word in ("taskfail", "forget", "reject"):
                setattr(self, "fail" if word == "taskfail" else word, True)
            else:
                self.apply_word(word)

    def apply_word(self, word: str) -> None:
        """A side's own option word (lower case); others are ignored (a credential has pieces
        that are no option)."""
        return None
