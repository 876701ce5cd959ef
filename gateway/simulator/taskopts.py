"""Where a task side of the simulator reads its options: the words of the upstream credential
(pieces split on ``-``, e.g. ``sk-sim-dur300``) and the ``sim:<option>`` words of the prompt
(``a storm at sea sim:taskfail``). Each side parses the words it knows."""

from __future__ import annotations

import re

from aiohttp import web

from gateway.simulator.routing import SimVendor

__all__ = ["option_words"]

_PROMPT_OPTION = re.compile(r"\bsim:([a-z]+\d*)\b")


def option_words(side: SimVendor, request: web.Request, prompt: str) -> list[str]:
    """The credential's pieces, then the prompt's option words: applied in this order, a prompt
    option overrides one of the credential."""
    return [*side.extract_key(request).split("-"), *_PROMPT_OPTION.findall(prompt)]
