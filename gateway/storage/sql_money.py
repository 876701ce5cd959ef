"""The money transactions, written once for both SQL backends (``?`` placeholders, dialect
snippets passed in). Each function runs inside a transaction the caller opened.

Lock order, so that concurrent transactions of several gateway processes on PostgreSQL cannot
deadlock each other: reservation rows first, then user rows by ascending id, then key rows by
ascending id. ``reserve`` touches one user row, then one key row; ``close_and_book`` deletes the
reservations, then updates users and keys in sorted order.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any

from gateway.accounts.records import RequestLog
from gateway.storage.base import StorageUnavailable
from gateway.storage.rows import LEASE_PREFIX, Reservation, Settlement
from gateway.storage.sql_budget import (
    BUDGET_COLUMNS,
    Starts,
    budget_left,
    counted,
    counted_args,
    fits,
    now_starts,
)
from gateway.storage.sql_dialect import Row as Row
from gateway.storage.sql_dialect import Tx as Tx
from gateway.storage.sql_request_log import insert_logs

log = logging.getLogger(__name__)

RES_COLUMNS = "request_id, user_id, key_id, amount_nano, instance, created_at"
CHUNK = 500  # ids per IN (...) list; far below SQLite's parameter limit


WriteFn = Callable[[Callable[[Tx], Awaitable[Any]]], Awaitable[Any]]  # runs fn in one write transaction


class NoFit(Exception):
    """Raised inside a transaction to roll it back: the reservation does not fit."""


def in_list(n: int) -> str:
    return "(" + ", ".join("?" * n) + ")"


def chunks(items: Sequence[Any], size: int = CHUNK) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# --- reserve -----------------------------------------------------------------------------------------
# The user update checks that the user is enabled and not deleted, as the key update checks the key
# (a change made on another replica counts at the next hold, whatever its auth cache says), and
# also the key's ceiling, so that in the common case nothing has to be rolled back; the key update
# re-checks it on its own (authoritative when another transaction got there first on PostgreSQL)
# and a miss there rolls the whole transaction back. Budgets (``sql_budget``) are checked the same
# way: the user's in its own update, the key's in both.
_RESERVE_USER = f"""UPDATE users SET balance_nano = balance_nano - ?, reserved_nano = reserved_nano + ?
WHERE id = ? AND enabled AND deleted_at IS NULL AND balance_nano >= ? AND {fits()}
AND EXISTS (
    SELECT 1 FROM api_keys k WHERE k.id = ? AND k.user_id = users.id AND k.enabled
    AND (k.quota_nano IS NULL OR k.spent_nano + k.reserved_nano + ? <= k.quota_nano) AND {fits("k.")})"""
_RESERVE_KEY = f"""UPDATE api_keys SET reserved_nano = reserved_nano + ?
WHERE id = ? AND enabled AND (quota_nano IS NULL OR spent_nano + reserved_nano + ? <= quota_nano)
AND {fits()}"""
_INSERT_RESERVATION = f"INSERT INTO reservations ({RES_COLUMNS}) VALUES (?, ?, ?, ?, ?, {{now}})"
# A quota lease's hold (``gateway.accounts.metering.quota_leases``): one row per lease, topped up in place.
_ADD_TO_LEASE = (_INSERT_RESERVATION + " ON CONFLICT (request_id) DO UPDATE SET "
                 "amount_nano = reservations.amount_nano + excluded.amount_nano")
_LOCK_RESERVATION = "UPDATE reservations SET amount_nano = amount_nano WHERE request_id = ?"
INSERT_LEDGER = """INSERT INTO ledger
(ts, kind, request_id, user_id, key_id, delta_nano, charge_nano, amount_nano)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)"""
INSERT_LEDGER_UNCHARGED = """INSERT INTO ledger
(ts, kind, request_id, user_id, key_id, delta_nano, charge_nano, amount_nano, uncharged_nano)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"""


async def reserve_in_tx(tx: Tx, r: Reservation, now_sql: str, room: int | None = None) -> bool:
    """False when the user's balance or the key's ceiling does not allow it, or leaves less than
    ``room`` (nothing changed); raises NoFit when the key update lost a race after the user update
    (caller rolls back). A hold carved from a quota lease (``r.lease`` another request id) is
    moved out of the lease's row into a row of its own instead (``_move_out_of_lease``)."""
    if r.lease is not None and r.lease != r.request_id:
        return await _move_out_of_lease(tx, r, now_sql)
    a = r.amount_nano
    need = a if room is None else max(room, a)
    topping_up = r.lease is not None and r.lease == r.request_id
    if topping_up:  # the lease's row is locked before the user's, as settlements lock them
        await tx.execute(_LOCK_RESERVATION, (r.request_id,))
    starts = now_starts()
    user_args = (a, a, r.user_id, need, need, *starts, r.key_id, need, need, *starts)
    if not await tx.execute(_RESERVE_USER, user_args):
        return False
    if not await tx.execute(_RESERVE_KEY, (a, r.key_id, need, need, *starts)):
        raise NoFit
    insert = _ADD_TO_LEASE if topping_up else _INSERT_RESERVATION
    await tx.execute(insert.replace("{now}", now_sql), (r.request_id, r.user_id, r.key_id, a, r.instance))
    await tx.execute(INSERT_LEDGER, (time.time(), "reserve", r.request_id, r.user_id, r.key_id, -a, 0, a))
    return True


async def _move_out_of_lease(tx: Tx, r: Reservation, now_sql: str) -> bool:
    """The lease's row gives up ``r``'s amount to a row of ``r``'s own (False, nothing changed, when
    it no longer holds it). No money moves and no ledger row is written: the user's and the key's
    open holds, which ``gateway audit`` compares with the ledger, stay what they were."""
    a = r.amount_nano
    if await tx.execute(_TAKE_FROM_LEASE, (a, r.lease, a)) != 1:
        return False
    await tx.execute(_DROP_EMPTY_LEASE, (r.lease,))
    await tx.execute(_INSERT_RESERVATION.replace("{now}", now_sql),
                     (r.request_id, r.user_id, r.key_id, a, r.instance))
    return True


_Waiting = tuple[Reservation, int | None, asyncio.Future[bool]]  # a hold, its room, its caller's answer


def _interrupted(batch: Iterable[_Waiting]) -> None:
    for _, _, future in batch:
        if not future.done():
            future.set_exception(ConnectionError("the reservation batch was interrupted"))


class GroupReserve:
    """Group commit of ``reserve``: reservations that arrive while a batch is being written wait
    for the next batch, and a batch is one transaction (one commit, one fsync). Inside it each
    reservation's conditional updates are evaluated on their own, in (user, key) order so that the
    batches of several processes lock rows in one order; one that does not fit changes nothing and
    does not affect the others. If the batch transaction fails (or lost a race with another process
    on PostgreSQL), each reservation is retried in its own transaction, so a bad one fails alone."""

    def __init__(self, write: WriteFn, now_sql: str) -> None:
        self._write = write  # runs a function in one write transaction
        self._now_sql = now_sql
        self._pending: list[_Waiting] = []
        self._scheduled = False  # a batch task will take what is pending
        self._batches: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def reserve(self, r: Reservation, room: int | None = None) -> bool:
        # shield: a cancelled caller must not cancel the batch (the hold may be made all the same)
        return await asyncio.shield(self.submit(r, room))

    def submit(self, r: Reservation, room: int | None = None) -> asyncio.Future[bool]:
        """Queue ``r`` for the next batch, which starts at the next turn of the event loop; its
        outcome, as ``reserve`` returns it."""
        if r.amount_nano < 0:
            raise ValueError("a reservation cannot be negative")
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((r, room, future))
        if not self._scheduled:  # the first waiter schedules a batch; later ones join it
            self._scheduled = True
            task = asyncio.create_task(self._run_batch())
            self._batches.add(task)
            task.add_done_callback(self._batch_ended)
        return future

    async def close(self, timeout_s: float) -> None:
        """Let the batches in progress end (for at most ``timeout_s``: the database may not answer)."""
        if self._batches:
            await asyncio.wait(list(self._batches), timeout=timeout_s)

    async def _run_batch(self) -> None:
        batch: list[_Waiting] = []
        try:
            async with self._lock:
                batch, self._pending, self._scheduled = self._pending, [], False
                if batch:
                    await self._commit(batch)
        finally:
            _interrupted(batch)  # cancelled (the loop stopping) or failed: no caller waits for ever

    def _batch_ended(self, task: asyncio.Task[None]) -> None:
        self._batches.discard(task)
        if not self._batches and self._pending:  # the batch meant for them never ran
            pending, self._pending, self._scheduled = self._pending, [], False
            _interrupted(pending)

    async def _commit(self, batch: list[_Waiting]) -> None:
        batch.sort(key=lambda item: (item[0].user_id, item[0].key_id))

        async def all_in_one(tx: Tx) -> list[bool]:
            return [await reserve_in_tx(tx, r, self._now_sql, room) for r, room, _ in batch]

        results: list[bool | BaseException]
        try:
            results = list(await self._write(all_in_one))
        except StorageUnavailable as exc:  # one by one would only fail as many times (logged once)
            results = [exc] * len(batch)
        except Exception as exc:
            if len(batch) > 1 and not isinstance(exc, NoFit):
                log.warning("group reserve of %d failed (%s); retrying one by one", len(batch), exc)
            results = [await self._alone(r, room) for r, room, _ in batch]
        for (_, _, future), result in zip(batch, results, strict=True):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def _alone(self, r: Reservation, room: int | None) -> bool | BaseException:
        try:
            return bool(await self._write(lambda tx: reserve_in_tx(tx, r, self._now_sql, room)))
        except NoFit:
            return False
        except Exception as exc:
            return exc


# --- close reservations (settle, release, crash release) --------------------------------------------
# Each charge also counts in the budget's current period (``sql_budget.counted``).
_BOOK_USER = f"""UPDATE users SET balance_nano = balance_nano + ?, used_nano = used_nano + ?,
request_count = request_count + ?, reserved_nano = reserved_nano - ?, {counted()} WHERE id = ?"""
_BOOK_KEY = f"""UPDATE api_keys SET spent_nano = spent_nano + ?, reserved_nano = reserved_nano - ?,
{counted()} WHERE id = ?"""
# The excess over a hold (``_charge_excess``); its amount never exceeds the room read just before.
_TAKE_USER = f"""UPDATE users SET balance_nano = balance_nano - ?, used_nano = used_nano + ?,
{counted()} WHERE id = ?"""
_TAKE_KEY = f"UPDATE api_keys SET spent_nano = spent_nano + ?, {counted()} WHERE id = ?"


async def delete_reservations(tx: Tx, request_ids: Sequence[str]) -> list[Row]:
    """Close the reservations that are still open; a closed one is simply absent from the result,
    which is what makes every close happen exactly once."""
    rows: list[Row] = []
    for part in chunks(sorted(request_ids)):
        rows += await tx.fetchall(
            f"DELETE FROM reservations WHERE request_id IN {in_list(len(part))} RETURNING {RES_COLUMNS}",
            part)
    return rows


_TAKE_FROM_LEASE = ("UPDATE reservations SET amount_nano = amount_nano - ? "
                    "WHERE request_id = ? AND amount_nano >= ?")
_DROP_EMPTY_LEASE = "DELETE FROM reservations WHERE request_id = ? AND amount_nano = 0"


Closure = tuple[Row, int, "RequestLog | None"]  # a closed hold's row, its charge, its request log


async def close_from_leases(tx: Tx, settlements: Sequence[Settlement]) -> list[Closure]:
    """Close holds carved from quota leases: each lease's row gives up what its settlements close
    (and goes when nothing is left in it). A lease row that no longer holds them (released as an
    orphan while this process was thought dead) closes them as holds of 0: their charges are then
    taken from what the balance and the key's ceiling allow now (``book_closures``), as a charge
    above a hold would be, and the lease's own returns are dropped (the sweeper gave them back)."""
    by_lease: dict[str, list[Settlement]] = {}
    for s in settlements:
        by_lease.setdefault(s.reservation.lease or "", []).append(s)
    closed: list[Closure] = []
    for lease_id in sorted(by_lease):  # reservation rows first, in one order (the module's lock order)
        group = by_lease[lease_id]
        total = sum(s.reservation.amount_nano for s in group)
        held = await tx.execute(_TAKE_FROM_LEASE, (total, lease_id, total)) == 1
        if held:
            await tx.execute(_DROP_EMPTY_LEASE, (lease_id,))
        elif total:
            log.warning("quota lease %s no longer holds %d nano-USD for %d settlements: charged from the "
                        "balance as it is now", lease_id, total, len(group))
        for s in group:
            r = s.reservation
            if not held and r.request_id == lease_id:
                continue
            row = {"request_id": r.request_id, "user_id": r.user_id, "key_id": r.key_id,
                   "amount_nano": r.amount_nano if held else 0}
            closed.append((row, max(s.charge_nano, 0), s.log))
    return closed


async def book_closures(tx: Tx, closed: Sequence[tuple[Row, int, RequestLog | None]], *,
                        count_requests: bool, release_kind: str, uncounted: Collection[str] = ()) -> None:
    """Money effects of closed reservations: (reservation row, charge, log or None).

    A charge up to the reservation comes out of the hold. A charge above it (the upstream reported
    more than the estimate reserved) takes the excess from what the user's balance and the key's
    ceiling still allow *now*, in this transaction: the rows are locked by the updates of the
    held part first (the lock order of this module), then read back, so a concurrent call on the
    same key or user can never make either overspend. Whatever could not be charged is written on
    the log row (``uncharged_nano``) and as an ``uncharged`` ledger row (no money moves). Closures
    named in ``uncounted`` (a quota lease giving back what it did not use) are not requests."""
    if not closed:
        return
    users: dict[int, list[int]] = {}  # id -> [balance delta, used delta, requests, reserved decrease]
    keys: dict[int, list[int]] = {}  # id -> [spent delta, reserved decrease]
    helds: list[int] = []  # the part of each charge the hold covers
    excess: list[int] = []  # the part above it
    for row, charge, _ in closed:
        amount, user_id, key_id = row["amount_nano"], row["user_id"], row["key_id"]
        held = min(max(charge, 0), amount)
        helds.append(held)
        excess.append(max(charge, 0) - held)
        u = users.setdefault(user_id, [0, 0, 0, 0])
        u[0] += amount - held
        u[1] += held
        u[2] += int(count_requests and row["request_id"] not in uncounted)
        u[3] += amount
        k = keys.setdefault(key_id, [0, 0])
        k[0] += held
        k[1] += amount
    starts = now_starts()  # one period for the whole transaction
    await tx.executemany(_BOOK_USER, [(*v, *counted_args(starts, v[1]), i) for i, v in sorted(users.items())])
    await tx.executemany(_BOOK_KEY, [(*v, *counted_args(starts, v[0]), i) for i, v in sorted(keys.items())])
    extra = await _charge_excess(tx, closed, excess, starts) if any(excess) else [0] * len(closed)
    ledger: list[tuple[Any, ...]] = []
    logs: list[RequestLog] = []
    ts = time.time()
    for (row, _, log), held, over, taken in zip(closed, helds, excess, extra, strict=True):
        amount, user_id, key_id = row["amount_nano"], row["user_id"], row["key_id"]
        charged = held + taken
        ledger.append((ts, "settle" if charged else release_kind, row["request_id"], user_id, key_id,
                       amount - charged, charged, amount, 0))
        if over - taken:
            ledger.append((ts, "uncharged", row["request_id"], user_id, key_id, 0, 0, 0, over - taken))
        if log is not None:
            log.charge_nano = charged
            log.uncharged_nano = over - taken
            logs.append(log)
    await tx.executemany(INSERT_LEDGER_UNCHARGED, ledger)
    await insert_logs(tx, logs)


async def _charge_excess(tx: Tx, closed: Sequence[tuple[Row, int, RequestLog | None]],
                         excess: Sequence[int], starts: Starts) -> list[int]:
    """How much of each excess is taken (in ``closed`` order), and take it. Runs after the held
    parts were booked, so every row read here is already locked by this transaction. A budget's
    room this period bounds it like the balance and the ceiling (their counts were moved to the
    current period by the booking)."""
    user_ids = sorted({row["user_id"] for (row, _, _), over in zip(closed, excess, strict=True) if over})
    key_ids = sorted({row["key_id"] for (row, _, _), over in zip(closed, excess, strict=True) if over})
    room_user: dict[int, int] = {}
    room_key: dict[int, int | None] = {}  # None: the key has no ceiling
    for part in chunks(user_ids):
        sql = (f"SELECT id, balance_nano, reserved_nano, {BUDGET_COLUMNS} FROM users "
               f"WHERE id IN {in_list(len(part))}")
        for u in await tx.fetchall(sql, part):
            budget = budget_left(u, starts)
            room_user[u["id"]] = max(int(u["balance_nano"]), 0) if budget is None else \
                min(max(int(u["balance_nano"]), 0), budget)
    for part in chunks(key_ids):
        for k in await tx.fetchall(f"SELECT id, quota_nano, spent_nano, reserved_nano, {BUDGET_COLUMNS} "
                                   f"FROM api_keys WHERE id IN {in_list(len(part))}", part):
            quota = k["quota_nano"]
            left = None if quota is None else max(quota - k["spent_nano"] - k["reserved_nano"], 0)
            budget = budget_left(k, starts)
            room_key[k["id"]] = budget if left is None else left if budget is None else min(left, budget)
    taken: list[int] = []
    users: dict[int, int] = {}
    keys: dict[int, int] = {}
    for (row, _, _), over in zip(closed, excess, strict=True):
        if not over:
            taken.append(0)
            continue
        user_id, key_id = row["user_id"], row["key_id"]
        key_room = room_key.get(key_id, 0)
        take = min(over, room_user.get(user_id, 0), over if key_room is None else key_room)
        room_user[user_id] = room_user.get(user_id, 0) - take
        if key_room is not None:
            room_key[key_id] = key_room - take
        users[user_id] = users.get(user_id, 0) + take
        keys[key_id] = keys.get(key_id, 0) + take
        taken.append(take)
    if users:
        await tx.executemany(_TAKE_USER, [(v, v, *counted_args(starts, v), i)
                                          for i, v in sorted(users.items()) if v])
        await tx.executemany(_TAKE_KEY, [(v, *counted_args(starts, v), i)
                                         for i, v in sorted(keys.items()) if v])
    return taken


async def release_where(tx: Tx, where: str, args: Sequence[Any]) -> int:
    """Release (charge 0) every open reservation matching ``where``, each a ``crash_release``
    ledger row and, for a call's hold, a ``crash_released`` request-log row (a quota lease's slab
    is no request); returns how many."""
    rows = await tx.fetchall(f"DELETE FROM reservations WHERE {where} RETURNING {RES_COLUMNS}", args)
    if not rows:
        return 0
    key_ids = sorted({r["key_id"] for r in rows})
    names: dict[int, str] = {}
    for part in chunks(key_ids):
        for k in await tx.fetchall(f"SELECT id, name FROM api_keys WHERE id IN {in_list(len(part))}", part):
            names[k["id"]] = k["name"]
    closed: list[Closure] = [(r, 0, None if str(r["request_id"]).startswith(LEASE_PREFIX) else RequestLog(
        request_id=r["request_id"], created_at=r["created_at"], user_id=r["user_id"], key_id=r["key_id"],
        token_name=names.get(r["key_id"], ""), route="", family="", model="", status=0,
        outcome="crash_released", error_code="crash_released")) for r in rows]
    await book_closures(tx, closed, count_requests=False, release_kind="crash_release")
    return len(rows)
