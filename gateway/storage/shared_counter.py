"""A number every process opening the same SQLite database reads from shared memory: eight bytes
in a file beside the database (``<database>-changes``), mapped into each process the way SQLite
maps its own ``-shm`` file. Reading it is a memory load where a database read of the same number
costs a read transaction (locks on the ``-shm`` file, often a page cache refilled after another
connection's commit): tens of microseconds on the path of every call that asks.

It mirrors the database's auth version (``SqliteStorage``): whoever commits a change of a key or a
user raises it to the version its transaction returned, under an exclusive ``flock`` of the file,
never lowering it, so a value once replaced is never seen again until the database's own version
moves on. Opening the database sets it to the version the database holds (a file left by an
earlier database of the same name may hold a higher number). An eight-byte aligned store is one
instruction on the machines SQLite's shared memory itself assumes; a reader sees the old value
or the new one.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_FORMAT = struct.Struct("<q")


class SharedCounter:
    """``path`` None: anonymous memory, for a database only this process can open (``:memory:``)."""

    def __init__(self, path: str | None) -> None:
        self._fd = -1
        if path is None:
            self._map = mmap.mmap(-1, _FORMAT.size)
            return
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(self._fd).st_size < _FORMAT.size:
                os.ftruncate(self._fd, _FORMAT.size)  # zeros: a new file reads 0
            self._map = mmap.mmap(self._fd, _FORMAT.size, mmap.MAP_SHARED)
        except BaseException:
            os.close(self._fd)
            raise

    @property
    def value(self) -> int:
        value: int = _FORMAT.unpack_from(self._map)[0]
        return value

    def raise_to(self, value: int) -> None:
        if value <= self.value:  # the common case: no lock taken
            return
        with self._locked():
            if value > self.value:
                _FORMAT.pack_into(self._map, 0, value)

    def reset(self, read: Callable[[], int]) -> None:
        """Set to what ``read`` returns, read while no other process can raise the counter: a
        change committed before the read is in it, one committed after raises it later."""
        with self._locked():
            _FORMAT.pack_into(self._map, 0, read())

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if self._fd < 0:
            yield
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self._map.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
