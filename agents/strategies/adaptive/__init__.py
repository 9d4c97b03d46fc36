"""Adaptive adversaries: attacks that change course according to what the compliance team does.

The paper's attacks (:mod:`biasleak.agents.strategies.compressed_sensing` and its neighbours)
assume a compliance team that answers every query exactly. A real team adds noise, caches,
refuses suspicious queries, limits the rate, answers only some metrics and charges a budget - and
every one of these defences is visible to the developer it is applied to: an answer that changes
when asked again, a refusal code, a ``retry_after``. An adaptive adversary reads those signals
and answers each defence with the move that defeats it, if there is one. The simulation plays
each against the policies, so that a policy is judged by the strongest attack it faces rather
than by the one it was designed against.

``noise_probe`` (:mod:`.noise_probe`)
    Re-asks the same model. Equal answers mean exact answers or a cache; different answers mean
    fresh noise, whose spread estimates its scale.
``averaging`` (:mod:`.averaging`)
    Compressed sensing where every model (the group-size probe included) is asked ``repeats``
    times and the answers are combined by their median (robust even to Cauchy noise, which has no
    mean), decoded with the noise the medians still carry (``amp`` with a Gaussian channel of the
    spread the repeats show); a repeated probe too noisy to trust gives way to group sizes fitted
    from all answers. Against fresh noise without a cumulative budget, per-query noise alone does
    not stop reconstruction. With ``jitter: auto`` it first re-asks one model: when the answers
    are equal (a cache), every repeat is nudged by ``Uniform(-1e-3, 1e-3)`` so that it is a new
    model.
``evasive`` (:mod:`.evasive`)
    Compressed sensing that routes around refusals: a probe refused for low support (or as a
    near-duplicate) is replaced by a tracker (Denning et al. 1979): four large-support models
    A, B = A with R and person 0 flipped, C = A with R and S flipped, D = A with S flipped, for
    disjoint random sets R and S, so that ``SP(B) - SP(C) + SP(D) - SP(A) = d_0 v_0`` while every
    two of them differ in at least ``|R|`` people; a batch refused as near-duplicate is redrawn
    with twice the perturbation; a rate-limited batch waits for ``retry_after`` (or a day).
``sequential_cs`` (:mod:`.sequential_cs`)
    Compressed sensing that decodes after every batch and stops as soon as the estimate is exact
    (OMP fitted the answers exactly) or has not changed for ``patience`` decodes: it spends only
    the queries it needs.
``metric_switching`` (:mod:`.metric_switching`)
    Tries compressed sensing through SP, then EO, equalized odds and finally the |SP| partition,
    moving on whenever the current metric is refused as not answered.
``budget_aware`` (:mod:`.budget_aware`)
    Knows the per-model epsilon and the budget, and plans: ``spread`` spends the whole budget on
    one compressed-sensing run; ``targeted`` spends it all on one person with repeated differencing
    pairs and takes the median; ``auto`` spreads when the budget buys at least
    ``4 k ln(n/k)`` models for the assumed minority size k, and targets otherwise.
``proxy_prior`` (:mod:`.proxy_prior`)
    Starts from a proxy estimate of A - a model trained on an external labelled sample, never on
    the audit set's attribute - and uses it as a prior: basis pursuit weighted by the proxy's
    probabilities. It measures the noise with 16 jittered copies of one model and keeps the
    proxy estimate when the answers' variance is not above twice the noise's.

One more adaptive adversary lives beside this package: the Sybil adversary
(:mod:`biasleak.agents.strategies.sybil`), which spreads one compressed-sensing attack over
several identities to multiply budgets and rate limits kept per identity.

The strategies that extend compressed sensing say what each outstanding query is for with
:class:`~biasleak.agents.strategies.compressed_sensing.Pending` (a probe, a batch, a noise or
cache check, a tracker), so that the reply handed back next is read the right way. They match
refusals by their reason code only (``metric_not_allowed``, ``rate_limited``, ``near_duplicate``,
``low_support``, ``budget_exhausted``), never by the human-readable detail.
"""

from __future__ import annotations

from biasleak.agents.strategies.adaptive._jitter import JITTER
from biasleak.agents.strategies.adaptive.averaging import (
    Averaging,
    AveragingConfig,
    median_spread,
)
from biasleak.agents.strategies.adaptive.budget_aware import BudgetAware, BudgetAwareConfig
from biasleak.agents.strategies.adaptive.evasive import Evasive, EvasiveConfig
from biasleak.agents.strategies.adaptive.metric_switching import (
    MetricSwitching,
    MetricSwitchingConfig,
)
from biasleak.agents.strategies.adaptive.noise_probe import (
    NoiseProbe,
    NoiseProbeConfig,
    noise_verdict,
)
from biasleak.agents.strategies.adaptive.proxy_prior import (
    NOISE_CHECKS,
    ProxyPrior,
    ProxyPriorConfig,
    proxy_estimate,
    proxy_probabilities,
    proxy_scores,
)
from biasleak.agents.strategies.adaptive.sequential_cs import SequentialCS, SequentialCSConfig

__all__ = [
    "JITTER",
    "NOISE_CHECKS",
    "Averaging",
    "AveragingConfig",
    "BudgetAware",
    "BudgetAwareConfig",
    "Evasive",
    "EvasiveConfig",
    "MetricSwitching",
    "MetricSwitchingConfig",
    "NoiseProbe",
    "NoiseProbeConfig",
    "ProxyPrior",
    "ProxyPriorConfig",
    "SequentialCS",
    "SequentialCSConfig",
    "median_spread",
    "noise_verdict",
    "proxy_estimate",
    "proxy_probabilities",
    "proxy_scores",
]
