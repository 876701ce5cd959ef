"""Recorded wire samples of the message protocol (written from the public wire format)."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES = Path(__file__).parent / "samples"


@pytest.fixture
def sample() -> object:
    def read(name: str) -> bytes:
        return (SAMPLES / name).read_bytes()

    return read
