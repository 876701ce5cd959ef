"""Process tuning: every change the gateway makes to how the Python runtime, the C library or the
kernel treat its process, in one module, each with its reason.

A performance setting stays here only while a measurement shows it gains more than 2% on what it
is for; the figures and the commands that measured them are in docs/performance.md ("Process
tuning"), which also names the settings that were measured and removed.

* ``freeze_startup_objects`` (a serving process, once its app is built): what start-up built
  (modules, plugins, the route table, the catalogue: tens of thousands of objects) is taken out of
  the collector's full collections, which otherwise walk all of it on the event loop.
* ``collect_young_less_often`` (the same): the youngest generation is collected less often.
* ``pin_mmap_threshold`` (every app): glibc's mmap threshold stays at 128 KiB, so that a large
  body's buffers are returned to the system when freed instead of staying in a fragmented heap.
* ``BusySwitchInterval`` (body work off the event loop): a shorter GIL switch interval while a
  worker thread runs Python on a large body, so that the event loop does not wait behind it.
* ``without_gc_pauses`` (the same thread): no cyclic collection while one large body is decoded.
* ``die_with_parent`` (not a performance setting): a worker ends when the process that
  supervises it dies, instead of serving on unsupervised.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's starting value, which it would otherwise raise
BUSY_SWITCH_INTERVAL_S = 0.0005  # Python's default is 0.005
YOUNG_COLLECTION_EVERY = 10_000  # Python's default is 700
_PR_SET_PDEATHSIG = 1


def freeze_startup_objects() -> None:
    """Collect what start-up left over, then move every object left out of the collector's view:
    a full collection would otherwise walk them all, holding the event loop, every few seconds
    under load."""
    gc.collect()
    gc.freeze()


def collect_young_less_often() -> None:
    """Collect the youngest generation every YOUNG_COLLECTION_EVERY allocations instead of
    Python's 700, so that a call's short-lived objects mostly die before a collection sees them."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY)


def pin_mmap_threshold() -> None:
    """Pin glibc's mmap threshold at its starting value: by default it grows to the size of the
    largest block freed, up to 32 MiB, after which body-sized buffers come from the heap, which
    fragments and is rarely given back, so the process keeps every large body's memory for good.
    Pinned, each large buffer is its own mapping, returned to the system when freed. A no-op away
    from glibc."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


class BusySwitchInterval:
    """While a worker thread runs Python on a body, the event loop waits for the GIL up to a
    switch interval each time it needs it (several times per request it serves): a shorter
    interval for as long as there is body work keeps that wait well under a millisecond."""

    def __init__(self) -> None:
        self._saved = sys.getswitchinterval()

    def begin(self) -> None:
        self._saved = sys.getswitchinterval()
        sys.setswitchinterval(BUSY_SWITCH_INTERVAL_S)

    def end(self) -> None:
        sys.setswitchinterval(self._saved)


def without_gc_pauses(fn: Callable[[], T]) -> T:
    """``fn()`` with the cyclic GC paused. Decoding a body of many small messages makes hundreds
    of thousands of objects, and each allocation-triggered collection of the old generation walks
    the whole heap holding the GIL: the event loop would wait through each. Paused, the new objects
    are looked at once, young, by the next collection. Only the body-work thread does this, one
    body at a time."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return fn()
    finally:
        if paused:
            gc.enable()


def die_with_parent(sig: signal.Signals) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (``PR_SET_PDEATHSIG``), so
    that a supervisor killed with SIGKILL leaves no worker behind serving (and settling) as if
    nothing had happened. A no-op elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
