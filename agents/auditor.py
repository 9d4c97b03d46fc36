"""The external auditor: reads the compliance agent's query log and raises alerts.

Every ``every_hours`` simulated hours the auditor reads the queries logged since its last visit
(submitted models and outcomes; never the protected attribute) and runs its detectors, which are
pure functions of the log:

``near_duplicate``
    models within L1 distance ``threshold`` (in people: for 0/1 models, the number of people whose
    decision differs) of an earlier answered model of the same organisation - differencing pairs
    and re-asked noise probes (re-sending a refused query is not counted);
``low_support``
    models that accept (h >= 0.5) or reject fewer than ``k`` people - single-person queries;
``volume``
    more than ``max_models`` models from one organisation in one period;
``noise_family``
    at least ``min_models`` models from one identity in a period that all lie within ``threshold``
    of their median model - the signature of compressed sensing around one base model.

Each detector raises at most one alert per identity per visit, with a short evidence summary; the
alerts go to the compliance agent, which reacts as the scenario says.

The log holds service requests too (:attr:`~biasleak.agents.querylog.QueryRecord.kind`): the
detectors read the base model a post-processing request submits like a query's model; a request
that submits none (the oracle learner's) cannot be read by any detector, and each visit's
``audit_run`` event counts such requests as ``unread``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import simpy

from biasleak.agents.messages import Alert, Envelope, Mailbox
from biasleak.agents.querylog import QueryLogReader, QueryRecord

__all__ = ["DETECTORS", "Auditor", "DetectorSettings", "run_detectors"]


@dataclass(frozen=True)
class DetectorSettings:
    """Thresholds of the detectors (scenario files may override each)."""

    near_duplicate_threshold: float = 1.5
    near_duplicate_min_count: int = 1
    low_support_k: int = 5
    volume_max_models: int = 500
    noise_family_threshold: float = 0.15
    noise_family_min_models: int = 20


Finding = tuple[str, str, str]  # (identity, organization, evidence)


def _models(records: Sequence[QueryRecord]) -> list[tuple[QueryRecord, np.ndarray]]:
    return [(r, r.predictions) for r in records if r.predictions is not None]


def detect_near_duplicate(
    new: Sequence[QueryRecord], earlier: Sequence[QueryRecord], s: DetectorSettings
) -> list[Finding]:
    found = []
    history: dict[str, list[np.ndarray]] = defaultdict(list)
    for r, h in _models(earlier):
        if r.answered:
            history[r.organization].extend(h)
    counts: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r, h in _models(new):
        for row in h:
            past = history[r.organization]
            if past:
                dist = np.abs(np.stack(past) - row).sum(axis=1)
                if float(dist.min()) < s.near_duplicate_threshold:
                    counts[(r.sender, r.organization)].append(r.query_id)
        if r.answered:
            history[r.organization].extend(h)
    for (who, org), ids in sorted(counts.items()):
        if len(ids) >= s.near_duplicate_min_count:
            found.append(
                (
                    who,
                    org,
                    f"{len(ids)} model(s) within L1 distance "
                    f"{s.near_duplicate_threshold:g} of an earlier answered model (first "
                    f"in {ids[0]})",
                )
            )
    return found


def detect_low_support(
    new: Sequence[QueryRecord], earlier: Sequence[QueryRecord], s: DetectorSettings
) -> list[Finding]:
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for r, h in _models(new):
        accepted = np.count_nonzero(h >= 0.5, axis=1)
        bad = (accepted < s.low_support_k) | (h.shape[1] - accepted < s.low_support_k)
        counts[(r.sender, r.organization)] += int(np.count_nonzero(bad))
    return [
        (who, org, f"{c} model(s) accept or reject fewer than {s.low_support_k} people")
        for (who, org), c in sorted(counts.items())
        if c
    ]


def detect_volume(
    new: Sequence[QueryRecord], earlier: Sequence[QueryRecord], s: DetectorSettings
) -> list[Finding]:
    per_org: dict[str, int] = defaultdict(int)
    last_sender: dict[str, str] = {}
    for r, h in _models(new):
        per_org[r.organization] += h.shape[0]
        last_sender[r.organization] = r.sender
    return [
        (
            last_sender[org],
            org,
            f"{c} models from the organisation in one period (limit {s.volume_max_models})",
        )
        for org, c in sorted(per_org.items())
        if c > s.volume_max_models
    ]


def detect_noise_family(
    new: Sequence[QueryRecord], earlier: Sequence[QueryRecord], s: DetectorSettings
) -> list[Finding]:
    per_sender: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for r, h in _models(new):
        per_sender[(r.sender, r.organization)].extend(h)
    found = []
    for (who, org), rows in sorted(per_sender.items()):
        if len(rows) < s.noise_family_min_models:
            continue
        stack = np.stack(rows)
        centre = np.median(stack, axis=0)
        close = np.abs(stack - centre).mean(axis=1) < s.noise_family_threshold
        if int(close.sum()) >= s.noise_family_min_models:
            found.append(
                (
                    who,
                    org,
                    f"{int(close.sum())} of {len(rows)} models lie within "
                    f"{s.noise_family_threshold:g} of their median model",
                )
            )
    return found


DETECTORS: Final[dict[str, Callable[..., list[Finding]]]] = {
    "near_duplicate": detect_near_duplicate,
    "low_support": detect_low_support,
    "volume": detect_volume,
    "noise_family": detect_noise_family,
}
"""Detector name -> function(new records, earlier records, settings) -> findings."""


def run_detectors(
    names: Sequence[str],
    new: Sequence[QueryRecord],
    earlier: Sequence[QueryRecord],
    settings: DetectorSettings,
) -> list[tuple[str, Finding]]:
    """Run the named detectors; return (detector, finding) pairs in a stable order."""
    out = []
    for name in names:
        out.extend((name, f) for f in DETECTORS[name](new, earlier, settings))
    return out


class Auditor:
    """The external auditor as a SimPy process."""

    def __init__(
        self,
        env: simpy.Environment,
        *,
        query_log: QueryLogReader,
        compliance: Mailbox,
        detectors: Sequence[str],
        settings: DetectorSettings,
        every_hours: float,
        recommended_action: str,
        log: Any,
    ) -> None:
        unknown = [d for d in detectors if d not in DETECTORS]
        if unknown:
            raise ValueError(f"unknown detectors {unknown}; allowed: {list(DETECTORS)}")
        if every_hours <= 0:
            raise ValueError(f"every_hours must be > 0; received {every_hours!r}")
        self.env = env
        self.query_log = query_log
        """Read-only view of the compliance agent's query log."""
        self.compliance = compliance
        """The compliance agent's mailbox, for alerts."""
        self.detectors = tuple(detectors)
        self.settings = settings
        self.every_hours = float(every_hours)
        self.recommended_action = recommended_action
        self.log = log
        self.alerts = 0
        """Alerts raised so far."""
        self._seen = 0
        self.process = env.process(self.run())

    def run(self) -> Generator[simpy.Event, Any, None]:
        """The process body."""
        while True:
            yield self.env.timeout(self.every_hours)
            new, earlier = self.query_log.since(self._seen)
            self._seen += len(new)
            findings = run_detectors(self.detectors, new, earlier, self.settings)
            unread = sum(1 for r in new if r.kind != "query" and r.predictions is None)
            self.log.info(
                "audit_run",
                queries_read=len(new),
                alerts=len(findings),
                **({"unread": unread} if unread else {}),
            )
            for detector, (who, org, evidence) in findings:
                self.alerts += 1
                alert = Alert(who, org, detector, evidence, self.recommended_action, self.env.now)
                self.log.info(
                    "alert_raised",
                    developer=who,
                    organization=org,
                    detector=detector,
                    evidence=evidence,
                )
                self.compliance.send(Envelope(alert))
