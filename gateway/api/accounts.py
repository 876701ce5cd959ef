"""Users, keys and money, for plugins that serve accounts (the console, account and key endpoints,
metrics): the records, the nano-USD helpers, the storage and its rows, and the admin operations
the admin API uses (with ``idempotent``, the ``Idempotency-Key`` wrapper of a mutation)."""

from __future__ import annotations

from gateway.accounts.catalogue import Catalogue
from gateway.accounts.money import NANO_PER_USD, TokenPrices, nano_to_usd, ratio_of, scaled_cost, unit_cost
from gateway.accounts.records import KeyRecord, Outcome, Principal, RequestLog, UserRecord
from gateway.admin.api import AdminOps, KeyCreate, KeyPatch
from gateway.admin.api import _path_id as path_id
from gateway.admin.budgets import budget_json
from gateway.admin.idempotency import idempotent, user_caller
from gateway.admin.ops import log_filter, log_json, paging
from gateway.settings.model_ids import listed
from gateway.storage.base import Storage
from gateway.storage.rows import DailyCost, Document, LogFilter, SoftLimitCrossing

__all__ = [
    "NANO_PER_USD",
    "AdminOps",
    "Catalogue",
    "DailyCost",
    "Document",
    "KeyCreate",
    "KeyPatch",
    "KeyRecord",
    "LogFilter",
    "Outcome",
    "Principal",
    "RequestLog",
    "SoftLimitCrossing",
    "Storage",
    "TokenPrices",
    "UserRecord",
    "budget_json",
    "idempotent",
    "listed",
    "log_filter",
    "log_json",
    "nano_to_usd",
    "paging",
    "path_id",
    "ratio_of",
    "scaled_cost",
    "unit_cost",
    "user_caller",
]
