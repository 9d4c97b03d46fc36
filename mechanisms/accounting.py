r"""Privacy accounting: a ledger that charges each release and refuses to overspend.

Every differentially private answer spends part of a privacy budget ``(epsilon, delta)``. A
:class:`Ledger` records each charge, reports what is spent and what remains, and raises
:class:`BudgetExceeded` - leaving itself unchanged - for a charge that would go over the budget.
Overspending is never silent and a refused charge costs nothing.

Composition (how charges add up), chosen with ``composition=``; the theorems and their formulas
are in :mod:`~biasleak.mechanisms.composition`:

``"basic"``
    ``(sum eps_i, sum delta_i)``, summed exactly: each eps is read as the shortest decimal that
    round-trips the float (``0.1`` is 1/10), so 100 charges of 0.1 are exactly 10 - never below,
    and a budget of 10 holds exactly 100 of them.
``"advanced"``
    Dwork, Rothblum and Vadhan (2010), for heterogeneous charges; the ledger uses whichever of
    this and basic composition is smaller (both are valid guarantees).
``"kov"``
    Kairouz, Oh and Viswanath (2015): the closed-form heterogeneous bound of their Theorem 3.5,
    and, while every charge is the same (eps, delta), the exact optimal composition of their
    Theorem 3.3; again the smallest valid bound is used.

Checking a charge exactly costs rational arithmetic on every query, though almost every check
happens far from the limit. For basic composition the ledger therefore keeps, beside the exact
sums, float upper bounds on them (each step rounded up, so they never fall below the exact
sums). While those bounds plus the new charge stay strictly below the budget, the charge surely
fits and is accepted without rational arithmetic; its exact value is added to the exact sums
later, when something needs them. Near the limit every check takes the exact path, so the
decision is the same as with exact planning on every query.

``delta'`` (``slack``) is the part of the delta budget the advanced theorems may use; it defaults
to half the ledger's delta budget, so those compositions need ``delta > 0``.

A :class:`LedgerBook` keeps one ledger per developer identity or per organisation (all
identities of an organisation share its ledger, so Sybil identities gain nothing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, Literal

from biasleak.mechanisms._validation import (
    check_choice,
    check_delta,
    check_epsilon,
)
from biasleak.mechanisms.composition import (
    basic_composition,
    drv_composition,
    exact_decimal,
    float_above,
    kov_composition,
    kov_optimal_homogeneous,
    pad_up,
    round_down,
    round_up,
)

__all__ = [
    "COMPOSITIONS",
    "BudgetExceeded",
    "Charge",
    "Ledger",
    "LedgerBook",
    "basic_composition",
    "drv_composition",
    "kov_composition",
    "kov_optimal_homogeneous",
    "replay",
]

Composition = Literal["basic", "advanced", "kov"]
COMPOSITIONS: Final[tuple[str, ...]] = ("basic", "advanced", "kov")

BUDGET_EXCEEDED: Final = (
    "charging (epsilon={epsilon!r}, delta={delta!r}) would spend (epsilon={new_eps:.6g}, "
    "delta={new_delta:.3g}) under {composition} composition, over the budget "
    "(epsilon={budget_eps!r}, delta={budget_delta!r}); spent so far: (epsilon={spent:.6g}, "
    "delta={spent_delta:.3g}). Nothing was charged"
)
EXACT_ANSWER: Final = (
    "an exact answer (epsilon = inf) cannot be charged to a finite budget "
    "(epsilon={budget_eps!r}); nothing was charged"
)
NEEDS_SLACK: Final = (
    "{composition!r} composition needs a delta budget > 0 to hold its slack delta'; received "
    "delta={delta!r}. Use composition='basic' for pure eps-DP budgets"
)
SLACK_RANGE: Final = "slack must lie in (0, delta] = (0, {delta!r}]; received {slack!r}"


class BudgetExceeded(ValueError):
    """A charge would exceed the ledger's privacy budget; the ledger is unchanged."""


@dataclass(frozen=True)
class Charge:
    """One accepted charge."""

    epsilon: float
    delta: float


class Ledger:
    """A privacy budget that records charges and refuses to be overspent.

    Parameters
    ----------
    epsilon : float
        Total epsilon budget (> 0; ``math.inf`` tracks spending without a limit).
    delta : float
        Total delta budget in [0, 1).
    composition : {"basic", "advanced", "kov"}
        How charges add up (see the module docstring).
    slack : float, optional
        The delta' of advanced composition, in (0, delta]; defaults to ``delta / 2``. Only for
        "advanced" and "kov".

    Notes
    -----
    ``spent`` is the smallest valid bound for the charges so far, but never less than it was
    before (a bound for more charges is also one for fewer, and the exact KOV bound can be tighter
    for k + 1 charges than for k). The advanced theorems bound a sequence of charges whose sizes
    are fixed in advance; when a caller chooses the sizes adaptively, only basic composition is
    guaranteed (privacy filters, Rogers et al. 2016).

    Examples
    --------
    >>> ledger = Ledger(10.0)
    >>> for _ in range(100):
    ...     _ = ledger.charge(0.1)
    >>> ledger.spent, ledger.remaining
    (10.0, 0.0)
    >>> ledger.charge(0.1)
    Traceback (most recent call last):
    ...
    biasleak.mechanisms.accounting.BudgetExceeded: charging (epsilon=0.1, delta=0.0) would ...
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        composition: Composition | str = "basic",
        *,
        slack: float | None = None,
    ) -> None:
        self.epsilon: Final[float] = check_epsilon(epsilon, name="epsilon")
        """The epsilon budget."""
        self.delta: Final[float] = check_delta(delta, name="delta", allow_zero=True)
        """The delta budget."""
        self.composition: Final[str] = check_choice(composition, COMPOSITIONS, name="composition")
        """How charges compose."""
        if self.composition == "basic":
            if slack is not None:
                raise ValueError(
                    f"slack is the delta' of advanced composition; composition='basic' takes "
                    f"none (received {slack!r})"
                )
            self.slack: float = 0.0
            """The delta' reserved for advanced composition (0 for basic)."""
        else:
            if self.delta == 0.0:
                raise ValueError(NEEDS_SLACK.format(composition=self.composition, delta=delta))
            s = self.delta / 2.0 if slack is None else check_delta(slack, name="slack")
            if not (0.0 < s <= self.delta):
                raise ValueError(SLACK_RANGE.format(delta=self.delta, slack=slack))
            self.slack = s
        self._charges: list[Charge] = []
        self._eps_sum = Fraction(0)
        self._delta_sum = Fraction(0)
        # Running sums for the advanced bounds: sum eps^2, sum eps (e^eps - 1),
        # sum eps tanh(eps/2), sum log(1 - delta).
        self._sums = (0.0, 0.0, 0.0, 0.0)
        self._inf = False  # an exact answer was charged to an unlimited ledger
        self._homog = True  # every finite charge so far is the same (eps, delta); for kov
        self._last_plan: tuple[tuple[Any, ...], tuple[Charge, dict[str, Any]]] | None = None
        self._spent: tuple[float, float] = (0.0, 0.0)
        # The fast path (basic composition, finite budget): float upper bounds on the exact
        # sums, the largest floats the bounds may reach (strictly below the exact budgets), and
        # the charges accepted on the fast path whose exact values are not yet in the sums.
        self._fast = self.composition == "basic" and math.isfinite(self.epsilon)
        self._eps_hi = 0.0
        self._delta_hi = 0.0
        self._eps_room = math.nextafter(self.epsilon, -math.inf)
        self._delta_room = math.nextafter(self.delta, -math.inf)
        self._pending: dict[tuple[float, float], int] = {}

    # -- what has been spent -------------------------------------------------------------------

    def _settle(self) -> None:
        """Add the fast-path charges to the exact sums (and to ``spent``)."""
        if not self._pending:
            return
        eps_sum, delta_sum = self._eps_sum, self._delta_sum
        for (eps, dlt), count in self._pending.items():
            eps_sum += exact_decimal(eps) * count
            delta_sum += exact_decimal(dlt) * count
        self._pending.clear()
        self._eps_sum, self._delta_sum = eps_sum, delta_sum
        # basic composition: spent is the rounded-up exact sum (the fast path never runs after
        # an exact answer, which needs an unlimited budget)
        self._spent = (round_up(eps_sum), round_up(delta_sum))

    def _surely_fits(self, epsilon: object, delta: object) -> tuple[float, float] | None:
        """The new float bounds if the charge surely fits the budget, else None (then only the
        exact path can tell). Anything but a finite float charge on a basic ledger with a finite
        budget takes the exact path, which also validates it."""
        if not (self._fast and isinstance(epsilon, float) and isinstance(delta, float)):
            return None
        if not (0.0 < epsilon < math.inf and 0.0 <= delta < 1.0):
            return None
        # round-to-nearest errs by at most half a unit in the last place: one step up covers it
        eps_hi = math.nextafter(self._eps_hi + float_above(epsilon), math.inf)
        if eps_hi > self._eps_room:
            return None
        delta_hi = self._delta_hi
        if delta != 0.0:
            delta_hi = math.nextafter(delta_hi + float_above(delta), math.inf)
            if delta_hi > self._delta_room:
                return None
        return eps_hi, delta_hi

    @property
    def charges(self) -> tuple[Charge, ...]:
        """Every accepted charge, in order."""
        return tuple(self._charges)

    @property
    def spent(self) -> float:
        """Epsilon spent so far under the ledger's composition (never rounded down)."""
        self._settle()
        return self._spent[0]

    @property
    def spent_delta(self) -> float:
        """Delta spent so far (including the slack once advanced composition is in use)."""
        self._settle()
        return self._spent[1]

    @property
    def remaining(self) -> float:
        """Epsilon left (never rounded up; 0.0 when exhausted)."""
        if math.isinf(self.epsilon):
            return math.inf
        self._settle()
        if self.composition == "basic":
            return max(round_down(exact_decimal(self.epsilon) - self._eps_sum), 0.0)
        return max(self.epsilon - self.spent, 0.0)

    @property
    def remaining_delta(self) -> float:
        """Delta left."""
        return max(self.delta - self.spent_delta, 0.0)

    def __repr__(self) -> str:
        return (
            f"Ledger(epsilon={self.epsilon!r}, delta={self.delta!r}, "
            f"composition={self.composition!r}, spent={self.spent!r}, "
            f"charges={len(self._charges)})"
        )

    # -- charging ------------------------------------------------------------------------------

    def _bounds(
        self,
        k: int,
        eps_sum: Fraction,
        delta_sum: Fraction,
        sums: tuple[float, ...],
        homogeneous: Charge | None,
    ) -> list[tuple[float, float, bool]]:
        """Every valid (eps, delta) bound for the charges, with whether it fits the budget."""
        fits_eps = math.isinf(self.epsilon) or eps_sum <= exact_decimal(self.epsilon)
        out = [
            (
                round_up(eps_sum),
                round_up(delta_sum),
                fits_eps and delta_sum <= exact_decimal(self.delta),
            )
        ]
        if self.composition == "basic" or k == 0:
            return out
        sq, drv_lin, kov_lin, log_keep = sums
        s = self.slack
        log_inv = math.log(1.0 / s)
        drv = pad_up(math.sqrt(2.0 * log_inv * sq) + drv_lin)
        drv_delta = delta_sum + exact_decimal(s)
        out.append(
            (
                drv,
                round_up(drv_delta),
                drv <= self.epsilon and drv_delta <= exact_decimal(self.delta),
            )
        )
        if self.composition == "kov":
            kov = pad_up(
                min(
                    float(eps_sum),
                    kov_lin + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / s)),
                    kov_lin + math.sqrt(2.0 * sq * log_inv),
                )
            )
            kov_delta = s if delta_sum == 0 else pad_up(-math.expm1(math.log1p(-s) + log_keep))
            out.append((kov, kov_delta, kov <= self.epsilon and kov_delta <= self.delta))
            if homogeneous is not None:
                e, d = kov_optimal_homogeneous(
                    homogeneous.epsilon, homogeneous.delta, k, delta_budget=self.delta
                )
                out.append((e, d, e <= self.epsilon and d <= self.delta))
        return out

    def can_afford(self, epsilon: float, delta: float = 0.0) -> bool:
        """Whether :meth:`charge` would accept this charge (nothing is charged)."""
        if self._surely_fits(epsilon, delta) is not None:
            return True
        try:
            planned = self._plan(epsilon, delta)
        except BudgetExceeded:
            return False
        self._last_plan = ((epsilon, delta, len(self._charges)), planned)
        return True

    def _plan(self, epsilon: float, delta: float) -> tuple[Charge, dict[str, Any]]:
        """The exact check: every bound in rational arithmetic (raises if none fits)."""
        self._settle()
        eps = check_epsilon(epsilon, name="epsilon")
        dlt = check_delta(delta, name="delta", allow_zero=True)
        charge = Charge(eps, dlt)
        delta_sum = self._delta_sum + exact_decimal(dlt)
        if math.isinf(eps):
            if math.isfinite(self.epsilon):
                raise BudgetExceeded(EXACT_ANSWER.format(budget_eps=self.epsilon))
            if delta_sum > exact_decimal(self.delta):
                raise BudgetExceeded(
                    f"delta {dlt!r} would take the delta spent to "
                    f"{round_up(delta_sum):.3g}, over the budget {self.delta!r}; "
                    "nothing was charged"
                )
            return charge, {
                "inf": True,
                "delta_sum": delta_sum,
                "spent": (math.inf, max(round_up(delta_sum), self._spent[1])),
            }
        eps_sum = self._eps_sum + exact_decimal(eps)
        sq, drv_lin, kov_lin, log_keep = self._sums
        sums = (
            self._sums
            if self.composition == "basic"
            else (
                sq + eps * eps,
                drv_lin + eps * (math.expm1(eps) if eps < 700.0 else math.inf),
                kov_lin + eps * math.tanh(eps / 2.0),
                log_keep + math.log1p(-dlt),
            )
        )
        same = not self._charges or (self._homog and charge == self._charges[0])
        homogeneous = charge if same else None
        bounds = self._bounds(len(self._charges) + 1, eps_sum, delta_sum, sums, homogeneous)
        fitting = [b for b in bounds if b[2]]
        if not fitting:
            best = min(bounds)
            raise BudgetExceeded(
                BUDGET_EXCEEDED.format(
                    epsilon=epsilon,
                    delta=delta,
                    new_eps=best[0],
                    new_delta=best[1],
                    composition=self.composition,
                    budget_eps=self.epsilon,
                    budget_delta=self.delta,
                    spent=self.spent,
                    spent_delta=self.spent_delta,
                )
            )
        best = min(fitting)
        previous = self._spent
        spent = (
            (math.inf, best[1])
            if self._inf
            else ((best[0], best[1]) if best[0] >= previous[0] else previous)
        )
        return charge, {
            "inf": False,
            "delta_sum": delta_sum,
            "eps_sum": eps_sum,
            "sums": sums,
            "homogeneous": homogeneous is not None,
            "spent": spent,
        }

    def charge(self, epsilon: float, delta: float = 0.0) -> Charge:
        """Charge one release; raise :class:`BudgetExceeded` (and change nothing) if over budget."""
        fast = self._surely_fits(epsilon, delta)
        if fast is not None:
            charge = Charge(float(epsilon), float(delta))
            self._charges.append(charge)
            self._eps_hi, self._delta_hi = fast
            key = (charge.epsilon, charge.delta)
            self._pending[key] = self._pending.get(key, 0) + 1
            self._last_plan = None
            return charge
        last = self._last_plan
        if last is not None and last[0] == (epsilon, delta, len(self._charges)):
            charge, plan = last[1]  # planned by can_afford just before, nothing changed since
        else:
            charge, plan = self._plan(epsilon, delta)
        self._last_plan = None
        self._charges.append(charge)
        self._delta_sum = plan["delta_sum"]
        self._spent = plan["spent"]
        if plan["inf"]:
            self._inf = True
        else:
            self._eps_sum = plan["eps_sum"]
            self._sums = plan["sums"]
            self._homog = plan["homogeneous"]
        if self._fast:  # the exact sums moved: restart the float bounds from them
            self._eps_hi = float_above(round_up(self._eps_sum))
            self._delta_hi = float_above(round_up(self._delta_sum)) if self._delta_sum else 0.0
        return charge


Scope = Literal["identity", "organization"]
SCOPES: Final[tuple[str, ...]] = ("identity", "organization")


def replay(ledger: Ledger, charges: Iterable[Charge | tuple[float, float]]) -> None:
    """Charge ``charges`` to ``ledger`` in order; the first that no longer fits fills the ledger
    (what it has left is spent, so that it refuses every further release) and ends the replay.

    What a ledger carries onto a new budget: what was spent stays spent.
    """
    for charge in charges:
        eps, delta = charge if isinstance(charge, tuple) else (charge.epsilon, charge.delta)
        if not ledger.can_afford(eps, delta):
            remaining = ledger.remaining
            if remaining > 0 and math.isfinite(remaining):
                try:
                    ledger.charge(remaining, 0.0)
                except BudgetExceeded:  # rounding at the very edge: already as full as it gets
                    pass
            return
        ledger.charge(eps, delta)


class LedgerBook:
    """Ledgers with one budget each, kept per developer identity or per organisation.

    With ``scope="organization"`` every identity of an organisation draws on the same ledger. A
    publication (:meth:`publish`) reaches every reader: it is charged to every ledger, and every
    ledger opened later starts with it.
    """

    def __init__(
        self,
        epsilon: float,
        delta: float = 0.0,
        composition: Composition | str = "basic",
        *,
        scope: Scope | str = "identity",
        slack: float | None = None,
    ) -> None:
        self.scope: Final[str] = check_choice(scope, SCOPES, name="scope")
        """Whether budgets are per identity or per organisation."""
        Ledger(epsilon, delta, composition, slack=slack)  # validate the parameters once
        self._params = (epsilon, delta, composition, slack)
        self._ledgers: dict[str, Ledger] = {}
        self._public: list[tuple[float, float]] = []

    def key(self, *, identity: str, organization: str) -> str:
        """The ledger key a developer's charges go to."""
        return identity if self.scope == "identity" else organization

    def ledger(self, *, identity: str, organization: str) -> Ledger:
        """The ledger for this developer (created on first use: the full budget, less what was
        published)."""
        k = self.key(identity=identity, organization=organization)
        if k not in self._ledgers:
            self._ledgers[k] = self.fresh()
        return self._ledgers[k]

    def fresh(self) -> Ledger:
        """A ledger as a reader not seen yet starts it: the full budget, less every publication
        (not kept in the book)."""
        eps, dlt, comp, slack = self._params
        ledger = Ledger(eps, dlt, comp, slack=slack)
        replay(ledger, self._public)
        return ledger

    @property
    def public(self) -> tuple[tuple[float, float], ...]:
        """(epsilon, delta) of every publication, in order."""
        return tuple(self._public)

    def readers(self) -> list[tuple[str | None, Ledger]]:
        """Every ledger a publication is charged to: each open one (by key, sorted) and, under
        the key ``None``, a fresh one (:meth:`fresh`) for the readers not seen yet."""
        return [*self.items(), (None, self.fresh())]

    def publish(self, epsilon: float, delta: float = 0.0) -> None:
        """Charge a publication to every open ledger and to every ledger opened later (check
        first with :meth:`readers`: a ledger that cannot afford it raises
        :class:`BudgetExceeded` and leaves the ledgers before it charged)."""
        for ledger in self._ledgers.values():
            ledger.charge(epsilon, delta)
        self._public.append((float(epsilon), float(delta)))

    def carry_public(self, charges: Iterable[tuple[float, float]]) -> None:
        """Take on publications made under an earlier book (every ledger opened later starts
        with them; the open ledgers carry their own charges)."""
        self._public.extend(charges)

    def charge(
        self, *, identity: str, organization: str, epsilon: float, delta: float = 0.0
    ) -> Charge:
        """Charge the developer's ledger (raises :class:`BudgetExceeded` when over budget)."""
        return self.ledger(identity=identity, organization=organization).charge(epsilon, delta)

    def items(self) -> list[tuple[str, Ledger]]:
        """(key, ledger) pairs, sorted by key."""
        return sorted(self._ledgers.items())
