r"""Attacks on the private fair-learning services: reading A out of what the services return.

The compliance team's fair-learning services (:mod:`biasleak.agents.services`) return models,
not fairness numbers, but every model they return is computed from the protected attribute A.
Their differential-privacy guarantee bounds what any attacker can learn; these two strategies
measure how much a developer does learn, so that a policy offering the services is judged by an
attack that targets them (the red team adds them wherever the matching service is offered).

``probe_postprocessing``: differencing through the linear program
    DP post-processing (:mod:`biasleak.mechanisms.fair.postprocessing`) counts the table of
    (base prediction, group, label) and returns the mixing probabilities
    ``p[yhat, a] = P[Y' = 1 | Yhat = yhat, A = a]`` of the most accurate equalized-odds classifier
    derived from the submitted base predictions. The developer chooses those predictions. The
    reference is the *perfect* base model, ``yhat = y``: both groups then have false-positive
    rate 0 and true-positive rate 1, and the program returns ``p = (0, 1)`` in both columns. To
    probe person i with label 0, the attacker sets ``yhat_i = 1``: group ``a_i`` alone gets a
    false-positive rate ``1 / n_{a_i,0}``. Equalized odds forces the other group up to the same
    rate, and the cheapest way (the program's unique optimum) is ``p[0, b] = 1 / n_{a_i,0}`` in
    the other group b while group ``a_i`` keeps ``p = (0, 1)``. So the column that moves names
    the group i is NOT in:

    .. math:: z_i = p[0, 0] - p[0, 1] > 0 \iff a_i = 1 .

    A person j with label 1 is probed by ``yhat_j = 0`` (a false negative): group ``a_j``'s
    true-positive rate drops to ``1 - 1/n_{a_j,1}``, the other group follows with
    ``p[1, b] = 1 - 1/n_{a_j,1}``, and :math:`z_j = p[1, 1] - p[1, 0] > 0 \iff a_j = 1`. The two
    kinds of probe touch different rows of the program, so one request probes one person of each
    label (verified for all four combinations of groups; a test checks it). Without noise every
    probed person's attribute is read exactly, two people per request.

    Under Laplace noise (scale ``2/eps`` counts per cell, public from the epsilon charged) the
    probed cell holds 1 + noise against 0 + noise in the other group's cell, and the program
    follows whichever noisy rate is larger: ``z`` keeps its sign with the probability that the
    difference of two Laplace draws stays above -1 (about 0.62 at eps = 1, 0.99 at eps = 10),
    which is close to the best any test on one release can do (the table is all the service
    uses). With ``repeats`` the probes are repeated and ``z`` summed, which weighs each
    repetition by how far the rates moved. People are probed in a seeded random order, all of
    them once before anyone twice (breadth first: with a budget, more people probed once leak
    more than fewer people probed twice); people never probed get the guess of the larger group
    with zero confidence.

``decode_oracle``: the least-squares learner is a linear measurement of A
    The DP oracle learner (:mod:`biasleak.mechanisms.fair.oracle`) returns, for each round t, the
    least-squares classifier ``w_t = G^{-1} (D^T c_t + Z_t)`` with ``D`` the encoded audit features
    and an intercept column, ``G = D^T D + r I`` (a tiny public ridge) and ``Z_t`` Laplace noise.
    The developer rebuilds ``D`` (the encoder of the base model's pipeline fitted on the public
    training split, :func:`audit_design`), so ``G w_t = D^T c_t + Z_t`` is known. With the round's
    multipliers ``mu_t = lambda^+_t - lambda^-_t`` - which the developer recomputes exactly by
    replaying the auditor's exponentiated-gradient steps on the released noisy violations
    (:func:`replay_multipliers`) - the costs are
    ``c_i = (1 - 2 y_i)/m + mu_{t,y_i} (a_i / n_{1,y_i} - (1 - a_i) / n_{0,y_i})``, so

    .. math:: G w_t - D^\top (1 - 2y)/m = \sum_y \mu_{t,y}\, \delta_y + Z_t, \qquad
        \delta_y = \kappa_y D_y^\top (a_y - \pi_y 1),

    where ``D_y`` holds the rows of label y, ``pi_y = n_{1,y} / N_y`` and
    ``kappa_y = N_y / (n_{1,y} n_{0,y})``: every round measures the same two vectors (the
    difference of the groups' mean features within each label), and a least-squares fit over the
    rounds recovers them (exactly at eps = inf). The released violations are measurements of the
    same kind, :math:`\Delta_{t,y} = \kappa_y h_{t,y}^\top (a_y - \pi_y 1)` with ``h_t`` the
    round's classifier on the audit set (which the developer evaluates itself). Stacking both
    into ``b_y = kappa_y H_y e_y + noise`` with ``e_y = a_y - pi_y 1``, the attacker takes the
    linear minimum-mean-square-error estimate of ``e_y`` under a prior of independent attributes
    (:func:`decode_oracle_measurements`) and guesses ``a_i = 1`` where it is positive, i.e. where
    the estimated attribute exceeds the group share - the Bayes rule for balanced accuracy.
    Neither the group sizes nor ``kappa_y`` need to be known for that sign when the measurements
    are exact. With noise, each measurement is weighted by its public noise scale (computed from
    the service's public parameters: epsilon, delta, accountant, ``min_cell_size``, ``B``).
    When ``D_y`` has at least as many independent columns as there are people of label y the
    system determines every attribute; on a larger audit set the estimate is the in-sample linear
    regression of A on the features, which the exact game reveals in full.

Both strategies see only what a developer has: the public data, labels, their own submissions and
the services' replies (:class:`~biasleak.agents.strategies.base.DeveloperContext`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import Field
from scipy import special

from biasleak.agents.messages import Refusal, ServiceResult
from biasleak.agents.models import build_pipeline
from biasleak.agents.public import PublicData
from biasleak.agents.strategies.base import (
    Action,
    DeveloperContext,
    Estimate,
    RequestService,
    Stop,
    Strategy,
    StrategyConfig,
    Wait,
)
from biasleak.mechanisms.fair import laplace_vector, per_round_epsilon
from biasleak.mechanisms.fair.budget import ACCOUNTANTS
from biasleak.mechanisms.fair.oracle import auditor_sensitivity, learner_sensitivity

__all__ = [
    "DecodeOracle",
    "DecodeOracleConfig",
    "ProbePostprocessing",
    "ProbePostprocessingConfig",
    "audit_design",
    "decode_oracle_measurements",
    "oracle_noise_scales",
    "probe_base",
    "probe_statistics",
    "recovered_cost_sums",
    "replay_multipliers",
]

STOPPING_REFUSALS = frozenset({"budget_exhausted", "service_unavailable", "suspended", "invalid"})
"""Refusals after which asking again cannot succeed: the attack stops."""


# -------------------------------------------------------------------------------------------
# Post-processing probe: the math
# -------------------------------------------------------------------------------------------


def probe_base(
    labels: NDArray[Any], *, false_positive: int | None, false_negative: int | None
) -> NDArray[np.int8]:
    """The probing base predictions: the labels (a perfect model) with one person of label 0
    predicted 1 and one person of label 1 predicted 0 (either may be None).

    Returns an int8 vector of 0/1 values. The people must have the label their role needs.
    """
    y = np.asarray(labels).astype(np.int8)
    base = y.copy()
    if false_positive is not None:
        if y[false_positive] != 0:
            raise ValueError(f"false_positive must have label 0; person {false_positive} has 1")
        base[false_positive] = 1
    if false_negative is not None:
        if y[false_negative] != 1:
            raise ValueError(f"false_negative must have label 1; person {false_negative} has 0")
        base[false_negative] = 0
    return base


def probe_statistics(mixing: NDArray[np.float64]) -> tuple[float, float]:
    """``(z_fp, z_tp)`` from a returned (2, 2) mixing: positive means group 1 (module docstring).

    ``z_fp = p[0, 0] - p[0, 1]`` reads the person probed as a false positive, ``z_tp = p[1, 1] -
    p[1, 0]`` the one probed as a false negative; exactly 0 is a tie (no information).
    """
    p = np.asarray(mixing, dtype=np.float64)
    if p.shape != (2, 2):
        raise ValueError(f"mixing must have shape (2, 2); received {p.shape}")
    return float(p[0, 0] - p[0, 1]), float(p[1, 1] - p[1, 0])


# -------------------------------------------------------------------------------------------
# Oracle decoder: the math
# -------------------------------------------------------------------------------------------


def audit_design(public: PublicData) -> NDArray[np.float64]:
    """The audit set's encoded features with an intercept column, as the oracle learner sees them.

    The encoder of :func:`~biasleak.agents.models.build_pipeline` fitted on the public training
    split (the compliance side does the same), then a column of ones, shape (n, d + 1).
    """
    encoder = build_pipeline(public.train).named_steps["encode"]
    encoder.fit(public.train.features)
    x = encoder.transform(public.audit.features)
    x = np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=np.float64)
    return np.hstack([x, np.ones((x.shape[0], 1))])


def _gram(design: NDArray[np.float64]) -> NDArray[np.float64]:
    """``D^T D`` plus the service's public ridge (as in ``run_oracle_learner``)."""
    k = design.shape[1]
    gram = design.T @ design
    gram += 1e-10 * (np.trace(gram) / k) * np.eye(k)
    return gram


def recovered_cost_sums(
    design: NDArray[np.float64], coefficients: NDArray[np.float64], intercepts: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``D^T c_t + Z_t`` for every round, shape (T, d + 1), from the returned classifiers.

    The service computed ``w = G^{-1} (D^T c + Z)`` and returned ``-w`` (coefficients, intercept),
    so multiplying back by ``G`` recovers the noisy cost sums.
    """
    weights = np.hstack([np.asarray(coefficients), np.asarray(intercepts)[:, None]])
    if weights.shape[1] != design.shape[1]:
        raise ValueError(
            f"the classifiers have {weights.shape[1] - 1} features; the design has "
            f"{design.shape[1] - 1} (is the encoding the service's?)"
        )
    return -weights @ _gram(design).T


def replay_multipliers(
    noisy_violations: NDArray[np.float64],
    *,
    bound: float,
    gamma: float,
    learning_rate: float | None = None,
) -> NDArray[np.float64]:
    """``mu_t = lambda^+_t - lambda^-_t`` of every round, shape (T, G - 1, 2), from the public
    violations: the auditor's exponentiated-gradient steps, replayed (as in the service)."""
    v = np.asarray(noisy_violations, dtype=np.float64)
    if v.ndim != 3 or v.shape[2] != 2:
        raise ValueError(f"noisy_violations must have shape (T, G - 1, 2); received {v.shape}")
    if not bound > 0 or not gamma >= 0:
        raise ValueError(f"bound must be > 0 and gamma >= 0; received {bound}, {gamma}")
    eta = 2.0 / bound if learning_rate is None else float(learning_rate)
    theta = np.zeros(2 * v[0].size)
    mu = np.empty_like(v)
    for t in range(v.shape[0]):
        lam = bound * np.exp(theta - np.logaddexp(0.0, special.logsumexp(theta)))
        half = lam.size // 2
        mu[t] = (lam[:half] - lam[half:]).reshape(v.shape[1:])
        flat = v[t].ravel()
        theta += eta * (np.concatenate([flat, -flat]) - gamma)
    return mu


def oracle_noise_scales(
    design: NDArray[np.float64],
    *,
    epsilon: float,
    delta: float,
    rounds: int,
    bound: float,
    min_cell_size: int,
    accountant: str,
) -> tuple[float, float]:
    """(learner, auditor) Laplace scales of a game with these public parameters (0 at eps = inf).

    Recomputed the way the service calibrates them; everything here is public (the features, the
    service's parameters and the epsilon and delta it charged).
    """
    if math.isinf(epsilon):
        return 0.0, 0.0
    m = design.shape[0]
    budget = per_round_epsilon(epsilon, delta, mechanisms=2 * rounds, accountant=accountant)
    eps = budget.per_mechanism
    row_norm = float(np.max(np.sum(np.abs(design), axis=1)))
    sens = row_norm * learner_sensitivity(groups=2, bound=bound, min_cell_size=min_cell_size)
    cost_max = (1.0 + bound * m / min_cell_size) / m
    throwaway = np.random.default_rng(0)  # only the scale is used, never the draw
    learner = laplace_vector(
        np.zeros(design.shape[1]),
        l1_sensitivity=sens,
        epsilon=eps,
        rng=throwaway,
        float_error=4.0 * m * m * row_norm * cost_max * 2.0**-53,
    ).scale
    auditor = laplace_vector(
        np.zeros(2),
        l1_sensitivity=auditor_sensitivity(groups=2, min_cell_size=min_cell_size),
        epsilon=eps,
        rng=throwaway,
        float_error=16.0 * m * 2.0**-53,
    ).scale
    return float(learner), float(auditor)


def decode_oracle_measurements(
    design: NDArray[np.float64],
    labels: NDArray[Any],
    *,
    cost_sums: NDArray[np.float64],
    multipliers: NDArray[np.float64],
    classifiers: NDArray[np.float64] | None = None,
    violations: NDArray[np.float64] | None = None,
    learner_scale: NDArray[np.float64] | float = 0.0,
    auditor_scale: NDArray[np.float64] | float = 0.0,
) -> NDArray[np.float64]:
    """Per-person score whose sign is the guess (positive: group 1), from stacked game rounds.

    Parameters
    ----------
    design : (n, k) array
        :func:`audit_design`.
    labels : (n,) 0/1 array
    cost_sums : (R, k) array
        :func:`recovered_cost_sums` of every round of every game received.
    multipliers : (R, 2) array
        :func:`replay_multipliers` of those rounds (two groups: ``mu[:, 0, :]``).
    classifiers : (R, n) 0/1 array, optional
        Each round's classifier on the audit set; with ``violations`` (R, 2) adds the released
        violations as measurements.
    learner_scale, auditor_scale : float or (R,) arrays
        Laplace scales of the cost sums and the violations (0: exact).

    Returns the LMMSE estimate of ``a - pi`` within each label (module docstring), scaled by the
    prior variance; its sign does not depend on the unknown group sizes when the rounds are exact.
    """
    d = np.asarray(design, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64)
    g = np.asarray(cost_sums, dtype=np.float64)
    mu = np.asarray(multipliers, dtype=np.float64)
    n, k = d.shape
    if y.shape != (n,) or g.ndim != 2 or g.shape[1] != k or mu.shape != (g.shape[0], 2):
        raise ValueError(
            "design (n, k), labels (n,), cost_sums (R, k) and multipliers (R, 2) must agree; "
            f"received {d.shape}, {y.shape}, {g.shape}, {mu.shape}"
        )
    rows = g.shape[0]
    s_learn = np.broadcast_to(np.asarray(learner_scale, dtype=np.float64), (rows,))
    s_audit = np.broadcast_to(np.asarray(auditor_scale, dtype=np.float64), (rows,))
    g = g - (d.T @ ((1.0 - 2.0 * y) / n))[None, :]
    # delta_y by (weighted) least squares over rounds: G = mu @ [delta_0; delta_1] + Z.
    exact = not np.any(s_learn > 0)
    weight = np.ones(rows) if exact else 1.0 / np.maximum(s_learn, 1e-300)
    mw = mu * weight[:, None]
    deltas = np.linalg.lstsq(mw, g * weight[:, None], rcond=None)[0]  # (2, k)
    cov = np.linalg.pinv(mw.T @ mw)  # per unit variance of the weighted rows
    score = np.zeros(n)
    tau = 0.25  # prior variance of a_i with no knowledge of the group share
    for label in (0, 1):
        rows_y = np.flatnonzero(y == label)
        if rows_y.size == 0:
            continue
        blocks = [d[rows_y].T]
        obs = [deltas[label]]
        var = [np.full(k, 0.0 if exact else 2.0 * cov[label, label])]
        if classifiers is not None and violations is not None:
            h = np.asarray(classifiers, dtype=np.float64)[:, rows_y]
            blocks.append(h)
            obs.append(np.asarray(violations, dtype=np.float64)[:, label])
            var.append(2.0 * s_audit**2)
        H, b, r = np.vstack(blocks), np.concatenate(obs), np.concatenate(var)
        kappa = 1.0 / (rows_y.size * tau)  # N_y / (n1 n0) at a share of one half
        gram = (kappa**2 * tau) * (H @ H.T)
        if np.any(r > 0):
            solve = np.linalg.lstsq(gram + np.diag(r), b, rcond=None)[0]
        else:
            solve = np.linalg.lstsq(gram, b, rcond=None)[0]
        score[rows_y] = tau * kappa * (H.T @ solve)
    return score


# -------------------------------------------------------------------------------------------
# Strategies
# -------------------------------------------------------------------------------------------


class ProbePostprocessingConfig(StrategyConfig):
    """Configuration of :class:`ProbePostprocessing`."""

    kind: Literal["probe_postprocessing"] = "probe_postprocessing"
    targets: int | Literal["all"] = Field(
        "all", description="how many people to probe (a seeded random choice), or 'all'"
    )
    repeats: int = Field(1, ge=1, description="probes per person (summed under noise)")
    pair: bool = Field(True, strict=False, description="probe one person of each label per request")
    prepare_hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)


class ProbePostprocessing(Strategy):
    """Differencing through DP post-processing: one (or two) people's attribute per request."""

    ATTACKS: ClassVar[bool] = True
    USES_SERVICE: ClassVar[bool] = True

    kind = "probe_postprocessing"

    def __init__(self, config: ProbePostprocessingConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: ProbePostprocessingConfig = config
        n = context.n
        if isinstance(config.targets, int) and not 1 <= config.targets <= n:
            raise ValueError(f"targets must be 'all' or in [1, {n}]; received {config.targets}")
        self.labels = np.asarray(context.public.audit.labels).astype(np.int8)
        count = n if config.targets == "all" else int(config.targets)
        chosen = context.rng.permutation(n)[:count]
        zero = [int(i) for i in chosen if self.labels[i] == 0]
        one = [int(i) for i in chosen if self.labels[i] == 1]
        if config.pair:
            width = max(len(zero), len(one))
            one_pass = [
                (zero[k] if k < len(zero) else None, one[k] if k < len(one) else None)
                for k in range(width)
            ]
        else:
            one_pass = [(i, None) if self.labels[i] == 0 else (None, i) for i in map(int, chosen)]
        self.schedule: list[tuple[int | None, int | None]] = one_pass * config.repeats
        """The requests: (person probed as a false positive, as a false negative)."""
        self.z = np.zeros(n)
        """Sum of each person's probe statistics (positive: group 1)."""
        self.probes = np.zeros(n, dtype=np.int64)
        """Answered probes per person."""
        self.answered = 0
        self._next = 0
        self._retry_at: float | None = None
        self.stopped: str | None = None

    def next_action(self, now: float) -> Action:
        if self.stopped is not None:
            return Stop(self.stopped)
        if self._retry_at is not None and now < self._retry_at:
            return Wait(self._retry_at)
        self._retry_at = None
        if self._next >= len(self.schedule):
            return Stop("every probe sent")
        fp, fn = self.schedule[self._next]
        base = probe_base(self.labels, false_positive=fp, false_negative=fn)
        return RequestService("dp_postprocessing", base, prepare_hours=self.config.prepare_hours)

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:  # never queries
        return None

    def on_service_result(self, result: ServiceResult, now: float) -> None:
        if result.mixing is None:
            self._next += 1
            return
        fp, fn = self.schedule[self._next]
        z_fp, z_tp = probe_statistics(result.mixing)
        for person, z in ((fp, z_fp), (fn, z_tp)):
            if person is not None:
                self.z[person] += z
                self.probes[person] += 1
        self._next += 1
        self.answered += 1
        self._publish()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if refusal.reason in STOPPING_REFUSALS:
            self.stopped = f"service refused: {refusal.reason}"
        elif refusal.retry_after is not None:
            self._retry_at = float(refusal.retry_after)
        else:
            self._next += 1

    def _publish(self) -> None:
        n = self.context.n
        probed = self.probes > 0
        decided = probed & (self.z != 0.0)
        ones = int(np.count_nonzero(self.z[decided] > 0))
        majority = 1 if 2 * ones >= int(np.count_nonzero(decided)) else 0
        attribute = np.full(n, majority, dtype=np.int8)
        attribute[decided] = (self.z[decided] > 0).astype(np.int8)
        # Without noise |z| is 1/n_{a,y}: confidence in units of 1/n, like the targeted attacks.
        confidence = np.where(decided, np.abs(self.z) / np.maximum(self.probes, 1) * n, 0.0)
        self._set_estimate(Estimate(attribute, confidence, self.answered, self.kind))

    def report(self) -> dict[str, Any]:
        return {
            "requests_answered": self.answered,
            "people_probed": int(np.count_nonzero(self.probes)),
            "ties": int(np.count_nonzero((self.probes > 0) & (self.z == 0.0))),
            "stopped": self.stopped,
        }


class DecodeOracleConfig(StrategyConfig):
    """Configuration of :class:`DecodeOracle`: the service's public parameters and the plan."""

    kind: Literal["decode_oracle"] = "decode_oracle"
    learner: Literal["least_squares"] = "least_squares"
    requests: int = Field(1, ge=1, description="games to ask for (their rounds are pooled)")
    bound: float = Field(50.0, gt=0.0, allow_inf_nan=False, description="the service's B")
    gamma: float = Field(0.02, ge=0.0, le=1.0, allow_inf_nan=False, description="its gamma")
    learning_rate: float | None = Field(None, gt=0.0, allow_inf_nan=False)
    accountant: Literal[ACCOUNTANTS] = "pld"  # type: ignore[valid-type]
    min_cell_size: int = Field(10, ge=2, description="its public cell bound (noise scales)")
    use_violations: bool = Field(True, strict=False)
    prepare_hours: float = Field(0.0, ge=0.0, allow_inf_nan=False)


class DecodeOracle(Strategy):
    """Ask for the DP oracle learner and decode A from the classifiers and violations returned."""

    ATTACKS: ClassVar[bool] = True
    USES_SERVICE: ClassVar[bool] = True

    kind = "decode_oracle"

    def __init__(self, config: DecodeOracleConfig, context: DeveloperContext) -> None:
        super().__init__(config, context)
        self.config: DecodeOracleConfig = config
        self.design = audit_design(context.public)
        """The encoded audit features with an intercept column."""
        self.labels = np.asarray(context.public.audit.labels).astype(np.int64)
        self.results: list[ServiceResult] = []
        self._sent = 0
        self._retry_at: float | None = None
        self.stopped: str | None = None

    def next_action(self, now: float) -> Action:
        if self.stopped is not None:
            return Stop(self.stopped)
        if self._retry_at is not None and now < self._retry_at:
            return Wait(self._retry_at)
        self._retry_at = None
        if self._sent >= self.config.requests:
            return Stop("every game decoded")
        self._sent += 1
        return RequestService(
            "dp_oracle_learner",
            learner=self.config.learner,
            prepare_hours=self.config.prepare_hours,
        )

    def on_answer(self, values: NDArray[np.float64], now: float) -> None:  # never queries
        return None

    def on_service_result(self, result: ServiceResult, now: float) -> None:
        if result.coefficients is None or result.intercepts is None:
            return
        self.results.append(result)
        self._decode()

    def on_refusal(self, refusal: Refusal, now: float) -> None:
        if refusal.reason in STOPPING_REFUSALS:
            self.stopped = f"service refused: {refusal.reason}"
        elif refusal.retry_after is not None:
            self._retry_at = float(refusal.retry_after)
            self._sent -= 1

    def _decode(self) -> None:
        cfg = self.config
        sums, mus, hs, vs, s_l, s_a = [], [], [], [], [], []
        for r in self.results:
            assert r.coefficients is not None and r.intercepts is not None
            assert r.noisy_violations is not None
            rounds = r.intercepts.shape[0]
            sums.append(recovered_cost_sums(self.design, r.coefficients, r.intercepts))
            mu = replay_multipliers(
                r.noisy_violations,
                bound=cfg.bound,
                gamma=cfg.gamma,
                learning_rate=cfg.learning_rate,
            )
            mus.append(mu[:, 0, :])
            weights = np.hstack([r.coefficients, r.intercepts[:, None]])
            hs.append((self.design @ weights.T > 0.0).T.astype(np.float64))
            vs.append(r.noisy_violations[:, 0, :])
            learner, auditor = oracle_noise_scales(
                self.design,
                epsilon=r.epsilon_charged,
                delta=r.delta_charged,
                rounds=rounds,
                bound=cfg.bound,
                min_cell_size=cfg.min_cell_size,
                accountant=cfg.accountant,
            )
            s_l.append(np.full(rounds, learner))
            s_a.append(np.full(rounds, auditor))
        score = decode_oracle_measurements(
            self.design,
            self.labels,
            cost_sums=np.vstack(sums),
            multipliers=np.vstack(mus),
            classifiers=np.vstack(hs) if cfg.use_violations else None,
            violations=np.vstack(vs) if cfg.use_violations else None,
            learner_scale=np.concatenate(s_l),
            auditor_scale=np.concatenate(s_a),
        )
        attribute = (score > 0).astype(np.int8)
        spread = float(np.std(score))
        confidence = np.abs(score) / spread if spread > 0 else np.zeros_like(score)
        self._set_estimate(Estimate(attribute, confidence, len(self.results), self.kind))

    def report(self) -> dict[str, Any]:
        return {"games": len(self.results), "stopped": self.stopped}
