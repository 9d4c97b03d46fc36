"""Exposure: the answers-level ceilings, from each person's own shift in each answer.

The compliance agent hands every release of answered models to the :class:`Exposure`
(``on_release``: nothing in :mod:`biasleak.agents` imports this module), which holds the ground
truth like the evaluator and computes, for each model and each person, how far the answer moves
when that person's attribute is flipped and when the person is replaced by the reference of a
swap (:mod:`biasleak.mechanisms.ceiling._individual`), measured against the release's noise
scale. It counts them per developer, per organisation, and per person. When the run ends
(:meth:`Exposure.finish`) it composes each person's releases and logs one ``exposure`` event per
developer and per organisation: the answers-level ceilings (balanced accuracy with known group
sizes, the most exposed person, how many people are exposed beyond 60%, 75% and 90%, the most
exposed people by their row in the audit set, and the proxy-prior ceiling for attackers that
start from a proxy model), and keeps the count matrices in the run's side file
(``exposure/<who>/flip/...`` and ``exposure/<who>/reference/...``) so that the composition can be
redone from the side file alone.

These are facts about the audit set for the evaluator; no developer ever sees them.

Services' releases (count tables, cost sums) and publications (which reach every developer and
organisation) enter with their guarantee: the same pair for everyone. So do Attribute-Conceal's
and smooth-Laplace's flips (their noise scale changes with the group sizes; the guarantee is what
is proved), and every release of the Gaussian mechanism.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from biasleak.agents.compliance import ReleaseRecord
from biasleak.mechanisms.ceiling import (
    EO_FAMILY,
    Pair,
    PersonLedger,
    ReleaseSpec,
    balanced_accuracy_from_tv,
    flip_shifts,
    float_error,
    laplace_units,
    person_bounds,
    reference_shifts,
    release_pairs,
)
from biasleak.mechanisms.ceiling._individual import shift_levels

__all__ = ["EXPOSED_LEVELS", "MOST_EXPOSED", "Exposure", "service_specs"]

EXPOSED_LEVELS: Final = (60, 75, 90)
"""Per-person ceilings (%) at which people are counted as exposed."""

_MODELS_AT_ONCE: Final = 32
"""Models whose per-person shifts are computed together (a bound on the temporaries' size)."""

MOST_EXPOSED: Final = 10
"""How many of the most exposed people an ``exposure`` event names."""


def service_specs(event: dict[str, Any]) -> list[ReleaseSpec]:
    """The releases of one ``service_answered`` event (the services' own accounting).

    Post-processing releases the count table once at ``epsilon``; the oracle learner composes 2T
    mechanisms at the per-mechanism epsilon it logged. A non-private run is exact.
    """
    epsilon = float(event["epsilon_charged"])
    if math.isinf(epsilon):
        return [ReleaseSpec("exact", math.inf)]
    delta = float(event.get("delta_charged", 0.0) or 0.0)
    if event["service"] == "dp_postprocessing":
        return [ReleaseSpec("service", epsilon, delta)]
    per = float(event["per_mechanism_epsilon"])
    return [ReleaseSpec("service", per)] * (2 * int(event["rounds"]))


class Exposure:
    """Per-person accounting of a run's releases (the evaluator's side: holds the attribute)."""

    def __init__(self, protected: Any, labels: Any, log: Any, keep: Any = None) -> None:
        self._a = np.asarray(protected).astype(bool)
        self._y = np.asarray(labels).astype(bool)
        self.n = int(self._a.size)
        self.log = log
        self._keep = keep
        self._own: dict[str, tuple[PersonLedger, PersonLedger]] = {}
        """Identity -> (flip, reference) ledgers of its own fresh releases."""
        self._foreign: dict[str, tuple[PersonLedger, PersonLedger]] = {}
        """Identity -> ledgers of cached answers first released to other identities."""
        self._foreign_org: dict[str, tuple[PersonLedger, PersonLedger]] = {}
        """Organisation -> ledgers of cached answers first released outside it."""
        self._orgs: dict[str, str] = {}
        self._public: tuple[PersonLedger, PersonLedger] | None = None
        """Ledgers of the publications, which every developer and organisation reads."""

    def _ledgers(
        self, table: dict[str, tuple[PersonLedger, PersonLedger]], key: str
    ) -> tuple[PersonLedger, PersonLedger]:
        if key not in table:
            table[key] = (PersonLedger(self.n), PersonLedger(self.n))
        return table[key]

    def population(self, metric: str) -> int:
        """The number of people the metric is computed on."""
        return int(self._y.sum()) if metric in EO_FAMILY else self.n

    def __call__(self, record: ReleaseRecord) -> None:
        """Account one release (the compliance agent's ``on_release`` callback)."""
        self._orgs[record.sender] = record.organization
        if record.origin is None:
            targets = [self._ledgers(self._own, record.sender)]
        else:
            targets = [self._ledgers(self._foreign, record.sender)]
            if record.origin.organization != record.organization:
                targets.append(self._ledgers(self._foreign_org, record.organization))
        for flips, refs in targets:
            self._account(record, flips, refs)

    def add_service(self, sender: str, organization: str, facts: dict[str, Any]) -> None:
        """Account a service run (the compliance agent's ``on_service`` callback): its releases'
        guarantee, the same for everyone (:func:`service_specs`)."""
        self._orgs[sender] = organization
        flips, refs = self._ledgers(self._own, sender)
        for spec in service_specs(facts):
            flip, _ = release_pairs(spec, "policy")
            for pair, k in flip:
                flips.add_common(pair, k)
                refs.add_common(pair, k)  # each half of a swap is one flip

    def add_publication(self, facts: dict[str, Any]) -> None:
        """Account a publication (the compliance agent's ``on_publication`` callback): it
        reaches every reader, so its guarantee (the epsilon it was charged, under the rule that
        one person's attribute changes) enters every developer's and organisation's ceilings."""
        if self._public is None:
            self._public = (PersonLedger(self.n), PersonLedger(self.n))
        flips, refs = self._public
        eps, delta = float(facts["epsilon_charged"]), float(facts["delta_charged"])
        spec = ReleaseSpec("service", eps, delta)
        flip, _ = release_pairs(spec, "policy")
        for pair, k in flip:
            flips.add_common(pair, k)
            refs.add_common(pair, k)  # each half of a swap is one flip

    def _account(self, r: ReleaseRecord, flips: PersonLedger, refs: PersonLedger) -> None:
        m = int(r.models.shape[0])
        pop = self.population(r.metric)
        f = r.facts
        mechanism = "exact" if f.sampler == "naive" else f.mechanism
        spec = ReleaseSpec(
            mechanism, f.epsilon, f.delta, m, f.bounding, r.metric, pop, f.noise_scale
        )
        if spec.exact:
            flips.add_common(Pair("exact"))
            refs.add_common(Pair("exact"))
            return
        flip_pairs, _ = release_pairs(spec, "policy")
        if mechanism in ("gaussian",):
            for pair, k in flip_pairs:
                flips.add_common(pair, k)
                refs.add_common(pair, k)
            return
        fe = float_error(pop)
        if mechanism == "laplace":
            truncate = f.bounding == "truncate"
            per = f.epsilon / m
            gamma, t = laplace_units(r.metric, pop, per / 2.0 if truncate else per)
            family = "pure" if truncate else "laplace"
            factor = 2.0 if truncate else 1.0

            def flip_level(d: NDArray[np.float64]) -> NDArray[np.float64]:
                return factor * _grid_shift(d, fe, gamma, t)

            ref_level = flip_level
        else:
            # the smooth-sensitivity mechanisms: the flip is the guarantee, the swap a plain
            # shift of the noise at the release's scale
            for pair, k in flip_pairs:
                flips.add_common(pair, k)
            family = "cauchy" if mechanism == "attribute_conceal" else "laplace"
            scale = f.noise_scale

            def ref_level(d: NDArray[np.float64]) -> NDArray[np.float64]:
                return np.where(d >= 0, (d + fe) / scale, 0.0)

        # each model's shifts depend on that model alone: a few models at a time keep the
        # (models x people) temporaries small, and their levels (int16) are counted once per
        # release
        y = self._y
        ref_levels = np.empty((m, self.n), dtype=np.int16)
        flip_levels = np.empty((m, self.n), dtype=np.int16) if mechanism == "laplace" else None
        for start in range(0, m, _MODELS_AT_ONCE):
            stop = min(start + _MODELS_AT_ONCE, m)
            models = r.models[start:stop]
            d_ref = reference_shifts(r.metric, models, protected=self._a, labels=y)
            ref_levels[start:stop] = shift_levels(ref_level(d_ref))
            if flip_levels is not None:
                d_flip = flip_shifts(r.metric, models, protected=self._a, labels=y)
                flip_levels[start:stop] = shift_levels(flip_level(d_flip))
        refs.add_levels(family, ref_levels)
        if flip_levels is not None:
            flips.add_levels(family, flip_levels)

    def finish(
        self,
        developers: list[dict[str, Any]],
        *,
        prior: NDArray[np.float64] | None = None,
        proxy: frozenset[str] = frozenset(),
    ) -> None:
        """Compose every developer's and organisation's releases and log their ``exposure``.

        ``developers`` are the header's developer records (``id``, ``organization``); ``proxy``
        the ids of attackers that start from a proxy model (their proxy-prior ceiling uses
        ``prior``).
        """
        members: dict[str, list[str]] = defaultdict(list)
        for d in developers:
            if d.get("organization") is not None:
                members[d["organization"]].append(d["id"])
        for d in developers:
            ident = d["id"]
            flips, refs = self._combined([ident], self._foreign.get(ident))
            self._log("developer", ident, flips, refs, prior if ident in proxy else None)
        for org, idents in sorted(members.items()):
            flips, refs = self._combined(idents, self._foreign_org.get(org))
            use_prior = prior if any(i in proxy for i in idents) else None
            self._log("organization", org, flips, refs, use_prior)

    def _combined(
        self, idents: list[str], extra: tuple[PersonLedger, PersonLedger] | None
    ) -> tuple[PersonLedger, PersonLedger]:
        flips, refs = PersonLedger(self.n), PersonLedger(self.n)
        for ident in idents:
            if ident in self._own:
                flips, refs = flips.merge(self._own[ident][0]), refs.merge(self._own[ident][1])
        for more in (extra, self._public):
            if more is not None:
                flips, refs = flips.merge(more[0]), refs.merge(more[1])
        return flips, refs

    def _log(
        self,
        kind: str,
        who: str,
        flips: PersonLedger,
        refs: PersonLedger,
        prior: NDArray[np.float64] | None,
    ) -> None:
        fields: dict[str, Any] = {kind: who, "people": self.n}
        if flips.empty:
            fields.update(
                balanced_accuracy=50.0,
                person=50.0,
                person_mean=50.0,
                exposed={str(k): 0 for k in EXPOSED_LEVELS},
                most_exposed=[],
                proxy_prior=None,
            )
            self.log.info("exposure", **fields)
            return
        tv, proxy_ceiling = _bounds(flips, prior)
        ref_tv, _ = _bounds(refs, None)
        person = 50.0 * (1.0 + tv)
        order = np.argsort(-person, kind="stable")[:MOST_EXPOSED]
        fields.update(
            # E[BA] <= 1/2 + (1/2n) sum_i (F_i + mean_j F_j) = 1/2 + mean_i F_i (the means
            # over each label stratum add up to its sum): see biasleak.mechanisms.ceiling
            balanced_accuracy=100.0
            * balanced_accuracy_from_tv(min(1.0, 2.0 * float(ref_tv.mean()))),
            person=float(person.max()),
            person_mean=float(person.mean()),
            exposed={str(k): int(np.count_nonzero(person >= k)) for k in EXPOSED_LEVELS},
            most_exposed=[[int(i), float(person[i])] for i in order],
            proxy_prior=proxy_ceiling,
        )
        self.log.info("exposure", **fields)
        if self._keep is not None:
            for name, ledger in (("flip", flips), ("reference", refs)):
                for key, array in ledger.arrays(f"exposure/{who}/{name}").items():
                    self._keep(key, array)


def _grid_shift(d: NDArray[np.float64], fe: float, gamma: float, t: float) -> NDArray[np.float64]:
    """The ``laplace`` shift dominating the safe sampler's discrete pair for exact shifts ``d``
    (:func:`biasleak.mechanisms.ceiling.discrete_laplace_shift`); 0 where there is no pair
    (``d < 0``)."""
    u = 0.5 / t
    correction = 2.0 * (u * u - u**4 / 3.0) if u < 1e-3 else 2.0 * math.log(math.cosh(u))
    out = d + fe
    out /= gamma
    out += 1.0
    out /= t
    out += correction
    out[~(d >= 0)] = 0.0
    return out


def _bounds(
    ledger: PersonLedger, prior: NDArray[np.float64] | None
) -> tuple[NDArray[np.float64], float | None]:
    """Per-person total variation bounds (and the proxy-prior ceiling).

    The same ledger composes to the same bounds: an honest developer's releases are the same in
    every world of a red team (its models do not depend on the noise), so the result is cached
    by the ledger's content.
    """
    pairs, counts = ledger.matrix()
    digest = hashlib.blake2b(np.ascontiguousarray(counts).tobytes(), digest_size=16)
    if prior is not None:
        digest.update(np.ascontiguousarray(prior, dtype=np.float64).tobytes())
    key = (tuple(pairs), counts.shape, digest.digest(), prior is not None)
    if key not in _COMPOSED:
        if len(_COMPOSED) >= _CACHE_SIZE:
            _COMPOSED.pop(next(iter(_COMPOSED)))
        _COMPOSED[key] = person_bounds(pairs, counts, prior=prior)
    tv, proxy = _COMPOSED[key]
    return tv.copy(), proxy


_CACHE_SIZE: Final = 8
_COMPOSED: dict[tuple[Any, ...], tuple[NDArray[np.float64], float | None]] = {}
"""Recently composed ledgers (oldest first), by content."""
