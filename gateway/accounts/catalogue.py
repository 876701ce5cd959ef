"""The public model catalogue: which models exist, who may call them, and at what price."""

from __future__ import annotations

from fractions import Fraction

from gateway.accounts.money import TokenPrices, ratio_of
from gateway.accounts.records import Principal
from gateway.runtime.errors import ModelNotAllowed, ModelNotFound
from gateway.runtime.observe import note_model
from gateway.settings.config import Config, ModelConfig


class Catalogue:
    """Built once from the config; every lookup is a dict access."""

    def __init__(self, config: Config) -> None:
        self._models: dict[str, ModelConfig] = {m.id: m for m in config.models}
        self._prices = {m.id: TokenPrices.from_config(m.price) for m in config.models}
        routed: set[str] = set()
        for upstream in config.upstreams:
            routed.update(upstream.model_map())
        self._routed = routed
        self._group_models = {name: (set(g.models) if g.models is not None else None)
                              for name, g in config.groups.items()}
        self._group_ratio = {name: ratio_of(g.ratio) for name, g in config.groups.items()}

    def model(self, model_id: str) -> ModelConfig | None:
        return self._models.get(model_id)

    def prices(self, model_id: str) -> TokenPrices:
        return self._prices[model_id]

    def ratio(self, group: str) -> Fraction:
        return self._group_ratio.get(group, Fraction(1))

    def _group_allows(self, group: str, model_id: str) -> bool:
        allowed = self._group_models.get(group, self._group_models.get("default"))
        return allowed is None or model_id in allowed

    def may_call(self, principal: Principal, model_id: str) -> bool:
        allow = principal.key.models
        return ((allow is None or model_id in allow)
                and self._group_allows(principal.user.group, model_id)
                and model_id in self._routed)

    def check(self, principal: Principal, model_id: str) -> ModelConfig:
        """The model if this caller may use it: 404 when unknown or unrouted, 403 when forbidden."""
        note_model(model_id)  # a refusal names it (its request-log row)
        model = self._models.get(model_id)
        if model is None or model_id not in self._routed:
            raise ModelNotFound(f"The model `{model_id}` does not exist or you do not have access to it.")
        if not self.may_call(principal, model_id):
            raise ModelNotAllowed(f"This API key is not allowed to use the model `{model_id}`.")
        return model

    def visible(self, principal: Principal) -> list[ModelConfig]:
        """Spec 4.1: only models the key may call (allowlist, group, and routed somewhere)."""
        return [m for m in self._models.values() if self.may_call(principal, m.id)]
