"""The public model catalogue: which models exist, who may call them, and at what price."""

from __future__ import annotations

from fractions import Fraction

import msgspec

from gateway.accounts.money import TokenPrices, ratio_of
from gateway.accounts.records import Principal
from gateway.runtime.errors import ModelNotAllowed, ModelNotFound
from gateway.runtime.observe import note_model
from gateway.settings.config import Config, ModelConfig
from gateway.settings.model_ids import ModelTable, listed

_NO_MARKUP = Fraction(1)  # a group without a ratio; made once, not on each of a call's two asks


class Catalogue:
    """Built once from the config; every lookup is a dict access."""

    def __init__(self, config: Config) -> None:
        # By id and by pattern (``vendor/*``: ``gateway.settings.model_ids``), exact ids first.
        self._models = ModelTable({m.id: m for m in config.models})
        self._prices = ModelTable({m.id: TokenPrices.from_config(m.price) for m in config.models})
        self._routed = ModelTable({public: True for up in config.upstreams for public in up.model_map()})
        # What the model lists show: the concrete ids of the catalogue, then those that only
        # upstreams list (priced by a pattern); a pattern itself is no id a client can call.
        concrete = dict.fromkeys([*self._models.concrete(), *self._routed.concrete()])
        self._listable = [model for model_id in concrete if (model := self.model(model_id)) is not None]
        self._group_models = {name: (set(g.models) if g.models is not None else None)
                              for name, g in config.groups.items()}
        self._group_ratio = {name: ratio_of(g.ratio) for name, g in config.groups.items()}

    def model(self, model_id: str) -> ModelConfig | None:
        """The entry of ``model_id``: its own, or that of the longest pattern that covers it under
        the id asked for (so that the call's log, answer and metrics name the concrete id)."""
        found = self._models.lookup(model_id)
        if found is None:
            return None
        entry_id, model = found
        return model if entry_id == model_id else msgspec.structs.replace(model, id=model_id)

    def label(self, model_id: str) -> str | None:
        """The id of ``model_id``'s own entry (the pattern, for an id a pattern covers): one of a
        bounded set of names, for metrics' labels; None outside the catalogue."""
        found = self._models.lookup(model_id)
        return None if found is None else found[0]

    def prices(self, model_id: str) -> TokenPrices:
        prices = self._prices.get(model_id)
        if prices is None:
            raise KeyError(model_id)
        return prices

    def ratio(self, group: str) -> Fraction:
        return self._group_ratio.get(group, _NO_MARKUP)

    def _group_allows(self, group: str, model_id: str) -> bool:
        allowed = self._group_models.get(group, self._group_models.get("default"))
        return allowed is None or model_id in allowed or listed(allowed, model_id)

    def may_call(self, principal: Principal, model_id: str) -> bool:
        """Allowlists and groups' lists may name patterns (``vendor/*``) as well as ids."""
        allow = principal.key.models
        return ((allow is None or model_id in allow or listed(allow, model_id))
                and self._group_allows(principal.user.group, model_id)
                and model_id in self._routed)

    def check(self, principal: Principal, model_id: str) -> ModelConfig:
        """The model if this caller may use it: 404 when unknown or unrouted, 403 when forbidden."""
        note_model(model_id)  # a refusal names it (its request-log row)
        model = self.model(model_id)
        if model is None or model_id not in self._routed:
            raise ModelNotFound(f"The model `{model_id}` does not exist or you do not have access to it.")
        if not self.may_call(principal, model_id):
            raise ModelNotAllowed(f"This API key is not allowed to use the model `{model_id}`.")
        return model

    def visible(self, principal: Principal) -> list[ModelConfig]:
        """Spec 4.1: only models the key may call (allowlist, group, and routed somewhere), by
        concrete id: a pattern is listed as nothing (docs/config.md, wildcard routes)."""
        return [m for m in self._listable if self.may_call(principal, m.id)]
