"""Regenerated models: a compressed-sensing attack that keeps its models as seeds, not arrays.

At the scale of a whole population the m perturbed models do not fit in memory (n = 43,131
people and m = 20,000 models are 7 GB in float64). With ``regenerate: true``
(``compressed_sensing`` only) the attack keeps none: each batch is drawn from its own seed
(:class:`~biasleak.agents.strategies.model_source.PerturbedModels`) when it is sent and again,
block by block in float32, at every pass of the blockwise AMP decoder
(:mod:`~biasleak.agents.strategies.blockwise`), which then decodes whatever ``decoder`` says
(``auto`` or ``amp``); the attack keeps only the answers. Its models are not the default path's
(another stream), and uncertain group sizes are not refitted (the fit needs the whole matrix).
The default path draws all models up front, as always.

What the strategy still needs from its models is computed here without keeping them: the
estimate decoded from the answers (:func:`regenerated_estimate`), and for the report each model's
accuracy on the public labels (:func:`model_accuracy`), measured once when a batch is built and
drawn once more for the batches never sent (:func:`regenerated_accuracy`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.strategies.base import Estimate
from biasleak.agents.strategies.blockwise import decode_blockwise
from biasleak.agents.strategies.model_source import PerturbedModels
from biasleak.agents.strategies.noise_model import NoiseModel

__all__ = ["model_accuracy", "regenerated_accuracy", "regenerated_estimate"]


def model_accuracy(models: NDArray[np.float64], labels: NDArray[np.integer]) -> NDArray[np.float64]:
    """Per model, the share of audit-set labels its thresholded outputs match."""
    return ((models >= 0.5) == (labels[None, :] == 1)).mean(axis=1)


def regenerated_accuracy(
    source: PerturbedModels,
    built: Mapping[int, NDArray[np.float64]],
    labels: NDArray[np.integer],
    *,
    batches: int,
) -> NDArray[np.float64]:
    """Every model's accuracy, batch by batch: as measured when built, else drawn once more.

    ``built`` maps a batch index to its models' accuracies, measured when the batch was drawn to
    be sent; the ``batches`` batches never built are drawn once more, one at a time.
    """
    return np.concatenate(
        [
            built[i] if i in built else model_accuracy(source.models(i), labels)
            for i in range(batches)
        ]
    )


def regenerated_estimate(
    source: PerturbedModels,
    answers: Mapping[int, NDArray[np.float64]],
    *,
    n1: int,
    n0: int,
    noise: NoiseModel,
) -> Estimate:
    """The estimate decoded by blockwise AMP from the answered batches over their redrawn models.

    ``answers`` maps a batch index to its answered values (one column: statistical parity).
    """
    done = sorted(answers)
    result = decode_blockwise(
        source,
        {i: answers[i][:, 0] for i in done},
        n1=n1,
        n0=n0,
        noise=noise,
    )
    used = int(sum(answers[i].shape[0] for i in done))
    return Estimate(result.attribute, result.confidence, used, result.method, result.probability)
