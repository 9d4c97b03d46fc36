"""The configurations of the compressed-sensing attacks, as scenario files write them.

Three attacks share one algorithm (:mod:`~biasleak.agents.strategies.compressed_sensing`) and
differ in the metric they ask for: ``compressed_sensing`` asks for statistical parity,
``eo_reveal`` for the equal opportunity gap and ``equalized_odds_reveal`` for both gaps of
equalized odds. Their common fields live in :class:`SensingConfig`: how many perturbed models
to send and how far from the base model (``queries``, ``perturbation``), in batches of how many
(``batch``), which decoder to use and how often (``decoder``, ``box``, ``decode_every``), and
how the group sizes are learned (``probe``, ``prior_minority``). The adaptive variants
(:mod:`biasleak.agents.strategies.adaptive`) extend it.

``compressed_sensing`` alone has ``regenerate``: keep no models and redraw each batch from its
seed when it is sent and when it is decoded, for populations whose model matrix would not fit in
memory. That path decodes only by blockwise AMP, so the configuration refuses any other decoder
(:data:`REGENERATE_DECODER`), and it leaves the option out of its dump when it is off, so
scenario hashes and log headers stay as they were before the option existed.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from biasleak.agents.strategies.base import StrategyConfig
from biasleak.agents.strategies.decoders import METHODS

__all__ = [
    "REGENERATE_DECODER",
    "CompressedSensingConfig",
    "EoRevealConfig",
    "EqualizedOddsRevealConfig",
    "SensingConfig",
]


REGENERATE_DECODER: Final = (
    "regenerate: true decodes with blockwise AMP: decoder must be 'auto' or 'amp' and box false; "
    "received decoder={decoder!r}, box={box}"
)


class SensingConfig(StrategyConfig):
    """Fields shared by the compressed-sensing strategies."""

    queries: int = Field(400, ge=1, description="number of perturbed models m")
    perturbation: float = Field(0.1, gt=0.0, le=1.0, description="noise half-width b")
    batch: int = Field(50, ge=1, description="models per query message")
    box: bool = Field(
        False, strict=False, description="add the box constraint 0 <= s <= 1/N1 + 1/N0"
    )
    decoder: Literal[METHODS] = Field(  # type: ignore[valid-type]
        "auto",
        description="decoder (auto: amp on noisy answers; on exact ones OMP, falling back to "
        "basis pursuit)",
    )
    probe: bool = Field(True, strict=False, description="learn the group sizes from a probe")
    prior_minority: float = Field(
        0.1, gt=0.0, lt=1.0, description="share of a = 0 assumed when the probe fails"
    )
    decode_every: int = Field(
        0, ge=0, description="decode after every k answered batches (0: once, at the end)"
    )
    prepare_hours: float = Field(
        0.5, ge=0.0, allow_inf_nan=False, description="time to build one batch"
    )


class CompressedSensingConfig(SensingConfig):
    """Compressed sensing through statistical parity answers (Algorithm 2)."""

    kind: Literal["compressed_sensing"] = "compressed_sensing"
    regenerate: bool = Field(
        False,
        strict=False,
        description="keep no models: redraw each batch from its own seed when it is sent and "
        "when it is decoded, and decode with blockwise AMP in float32 (for populations whose "
        "model matrix would not fit in memory)",
    )

    @model_validator(mode="after")
    def _regenerated_decoder(self) -> CompressedSensingConfig:
        if self.regenerate and (self.decoder not in ("auto", "amp") or self.box):
            raise ValueError(REGENERATE_DECODER.format(decoder=self.decoder, box=self.box))
        return self

    @model_serializer(mode="wrap")
    def _omit_default_regenerate(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Scenario hashes and log headers dump every field; leaving out the default keeps them
        # the same as before the option existed.
        data: dict[str, Any] = handler(self)
        if not self.regenerate:
            data.pop("regenerate", None)
        return data


class EoRevealConfig(SensingConfig):
    """Compressed sensing through equal opportunity answers (reaches people with y = 1)."""

    kind: Literal["eo_reveal"] = "eo_reveal"


class EqualizedOddsRevealConfig(SensingConfig):
    """Compressed sensing through equalized-odds answers (TPR and FPR gaps; reaches everyone)."""

    kind: Literal["equalized_odds_reveal"] = "equalized_odds_reveal"
