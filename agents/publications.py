"""Publications: figures the compliance team publishes, released through the policy gate.

A publication is a release like any other (:data:`~biasleak.mechanisms.policy.REQUEST_KINDS`):
it passes the same pipeline as a metric query or a service request, and what it spends goes to
the same privacy ledgers. Unlike them it reaches every reader, so every budget charges it to
every identity or organisation, those seen so far and those that come later, and a budget that
one of them can no longer afford refuses it. The refuse rules read the model it publishes
figures of; rate limits, which meter what developers ask for, do not apply.

:class:`AuditPublication` is the audit a regulator asks for: the selection rate of a model in
each protected group and their difference, from the accepted counts and the group sizes
released together with Laplace noise (:func:`~biasleak.mechanisms.audit.release_counts_and_totals`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from biasleak.mechanisms._validation import check_epsilon
from biasleak.mechanisms.audit import rate_difference, release_counts_and_totals
from biasleak.mechanisms.digests import model_digest
from biasleak.mechanisms.policy import Pending, Refused

__all__ = [
    "ATTRIBUTE_CHANGE_FACTOR",
    "AUDIT_NEIGHBOURING",
    "AuditPublication",
    "PublicationOutcome",
    "audit_vector",
]

AUDIT_NEIGHBOURING: Final = "add/remove one record"
"""The neighbouring rule the published ``epsilon`` is stated under (the audit literature's)."""
ATTRIBUTE_CHANGE_FACTOR: Final = 2.0
"""The published release's epsilon under biasleak's own rule (one person's protected attribute
changes), as a multiple of its add/remove epsilon (see :class:`AuditPublication`)."""
BAD_MODEL: Final = (
    "a published audit needs one prediction in [0, 1] per audit-set person (n = {n}); "
    "received {received}"
)


def audit_vector(
    protected: ArrayLike, predictions: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """What a published audit releases, exactly: ``(accepted per group, size per group)``.

    Groups in the order (advantaged A = 1, disadvantaged A = 0); a person is accepted when the
    model's prediction is at least 0.5.
    """
    a = np.asarray(protected) == 1
    accepted = np.asarray(predictions) >= 0.5
    counts = np.array(
        [np.count_nonzero(accepted & a), np.count_nonzero(accepted & ~a)], dtype=np.float64
    )
    sizes = np.array([np.count_nonzero(a), np.count_nonzero(~a)], dtype=np.float64)
    return counts, sizes


@dataclass(frozen=True)
class PublicationOutcome:
    """What a publication releases (``public``: every reader's) and what only the compliance
    side's log keeps (``internal``: the exact figures)."""

    public: dict[str, Any]
    internal: dict[str, Any]


@dataclass(eq=False)
class AuditPublication:
    r"""A private audit of ``model``: its selection rate per group and their difference.

    The released vector is (accepted in the advantaged group, accepted in the disadvantaged
    group, N1, N0): the counts of people the model accepts (h >= 0.5) and the group sizes, which
    biasleak keeps secret like every other function of the protected attribute. Laplace noise of
    scale ``2 / epsilon`` in each cell: adding or removing one record moves one total and at most
    one count by one, L1 sensitivity 2, so the release is ``epsilon``-DP under the add/remove
    rule. Under biasleak's own neighbouring rule (one person's attribute flips, the data set
    keeps its size) the person leaves one group and joins the other: both totals move by one, and
    both counts when the model accepts them, L1 sensitivity 4, so the same release is
    ``2 epsilon``-DP, which is what the ledgers are charged (they count every release under that
    rule); the public event states both. The rates divide the released counts by the released
    totals (post-processing: the totals floored at 1, the rates clipped to [0, 1]).

    A :class:`~biasleak.mechanisms.policy.ReleaseRun`: its noise comes from its own ``rng``, so
    that publishing changes no other draw of the compliance side.
    """

    epsilon: float
    """Under the add/remove rule (see above)."""
    model: Any
    """The predictions of the model the audit is about (e.g. the deployed base model)."""
    rng: np.random.Generator
    kind: ClassVar[str] = "audit_rates"
    """What is published (the request's ``metric``)."""

    def __post_init__(self) -> None:
        self.epsilon = check_epsilon(self.epsilon, allow_inf=False)

    @property
    def cost(self) -> tuple[float, float]:
        return ATTRIBUTE_CHANGE_FACTOR * float(self.epsilon), 0.0

    @property
    def digest(self) -> bytes:
        """The same audit of the same model at the same epsilon is the same release (something
        that is not a model has a digest too: :meth:`admit` refuses it)."""
        try:
            row = np.asarray(self.model, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            row = np.empty(0)
        return model_digest(np.append(row, float(self.epsilon)))

    def admit(self, q: Pending) -> Refused | None:
        try:
            h = np.asarray(self.model, dtype=np.float64)
        except (TypeError, ValueError):
            return Refused("invalid", BAD_MODEL.format(n=q.audit.n, received="no array"))
        if h.shape != (q.audit.n,) or not np.all((h >= 0.0) & (h <= 1.0)):
            received = f"shape {h.shape}" if h.shape != (q.audit.n,) else "values outside [0, 1]"
            return Refused("invalid", BAD_MODEL.format(n=q.audit.n, received=received))
        q.h = h.reshape(1, -1)
        return None

    def run(self, q: Pending) -> Refused | None:
        counts, sizes = audit_vector(q.audit.protected, q.h[0])
        released, _ = release_counts_and_totals(counts, sizes, epsilon=self.epsilon, rng=self.rng)
        noisy_counts, noisy_sizes = released.counts[:2], released.counts[2:]
        totals = np.maximum(noisy_sizes, 1.0)
        noisy_rates = np.clip(noisy_counts / totals, 0.0, 1.0)
        difference = float(noisy_rates[0] - noisy_rates[1])
        exact = rate_difference(counts, sizes)
        public = {
            "epsilon": float(self.epsilon),
            "neighbouring": AUDIT_NEIGHBOURING,
            "sensitivity": released.sensitivity,
            "epsilon_attribute_change": ATTRIBUTE_CHANGE_FACTOR * float(self.epsilon),
            "sensitivity_attribute_change": ATTRIBUTE_CHANGE_FACTOR * released.sensitivity,
            "noise_scale": released.scale,
            "released_counts": [float(v) for v in noisy_counts],
            "released_group_sizes": [float(v) for v in noisy_sizes],
            "selection_rates": [float(r) for r in noisy_rates],
            "rate_difference": difference,
        }
        internal = {
            "exact_counts": [int(c) for c in counts],
            "exact_group_sizes": [int(n) for n in sizes],
            "exact_rate_difference": exact,
            "error": abs(difference - exact),
        }
        q.result = PublicationOutcome(public, internal)
        return None
