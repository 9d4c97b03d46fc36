r"""The best balanced accuracy any (eps, delta)-DP release allows, by linear programming.

An audit set has n people with a binary attribute vector ``a`` in ``{0, 1}^n`` (1 = advantaged
group, of size N1; 0 = disadvantaged, of size N0). The *universe* of data sets is every vector in
which both groups are non-empty; two data sets are neighbours when they differ in exactly one
coordinate (a *flip*) and both lie in the universe. An attacker's guess ``g`` in ``{0, 1}^n`` is
scored by its balanced accuracy

.. math:: BA(g, a) = \frac12 \Big(\frac{\#\{i: a_i = g_i = 1\}}{N_1}
          + \frac{\#\{i: a_i = g_i = 0\}}{N_0}\Big).

Whatever a release publishes, the attacker's guess is a post-processing of it, and a
post-processing of an (eps, delta)-DP release is (eps, delta)-DP. So a release together with an
attacker is, without loss of generality, a conditional law ``P(g | a)`` on guesses, and it is
(eps, delta)-DP when for every ordered pair of neighbours ``(a, a')``

.. math:: \sum_g \max\big(0, P(g \mid a) - e^\varepsilon P(g \mid a')\big) \le \delta

(the largest ``P(S | a) - e^eps P(S | a')`` over sets of guesses ``S``; for ``delta = 0`` it is
``P(g | a) <= e^eps P(g | a')`` for every g). The largest expected balanced accuracy over such
laws, with ``a`` drawn from a prior, is the value of a linear program:
:func:`optimal_balanced_accuracy`. Two priors are offered: *known sizes* (``a`` uniform among the
vectors with exactly ``n0`` zeros, the attacker of the leakage figure) and *unknown sizes*
(``a`` uniform over the universe).

The full program (``method="full"``) has a variable ``P(g | a)`` for every ``a`` in the universe
and every ``g`` in ``{0, 1}^n`` (and, for ``delta > 0``, one auxiliary variable
``t_{a, a', g} >= max(0, P(g | a) - e^eps P(g | a'))`` per ordered neighbour pair and guess, with
``sum_g t <= delta``): about ``4^n`` variables, so it is refused above ``n = 6``
(:data:`FULL_MAX_N`).

Symmetry reduction (``method="symmetric"``). Permuting the people maps the universe, the
neighbour relation, both priors and the balanced accuracy onto themselves, and the
(eps, delta)-DP laws form a convex set (the constraints are linear in ``P``). Averaging an optimal
law over all ``n!`` permutations therefore gives a law that is still feasible, still optimal, and
permutation symmetric: ``P(g | a)`` depends only on the joint type of ``(a, g)``. With ``m`` the
number of zeros of ``a``, the type is ``(m, j0, j1)``, ``j0`` the zeros guessed 0 and ``j1`` the
ones guessed 1 (``0 <= j0 <= m``, ``0 <= j1 <= n - m``). The program's variables are the type
masses ``q(m, j0, j1)``: the probability that the guess falls in the type class, which has
``W(m, j0, j1) = C(m, j0) C(n - m, j1)`` members, each of probability ``q / W``. Then

* normalisation: ``sum_{j0, j1} q(m, j0, j1) = 1`` for every ``m`` in the universe;
* objective: ``sum_m w_m sum_{j0, j1} q(m, j0, j1) (j0/m + j1/(n - m))/2``, with ``w_m`` the
  prior's mass on the vectors with ``m`` zeros (1 at ``m = n0`` for known sizes,
  ``C(n, m)/(2^n - 2)`` for unknown sizes);
* flips: every ordered neighbour pair is a permutation of one of two pairs per ``m``: ``a`` with
  ``m`` zeros and ``a'`` equal to ``a`` with one zero, person i, flipped to 1 (``m - 1`` zeros),
  in either order. The permutations that fix this pair (those fixing i and each group of ``a``)
  split the guesses into orbits labelled by ``g_i``, ``x`` (zeros of ``a`` other than i guessed
  0, ``0 <= x <= m - 1``) and ``y`` (ones of ``a`` guessed 1, ``0 <= y <= n - m``); the orbit has
  ``C(m - 1, x) C(n - m, y)`` guesses, on which a symmetric law is constant. With ``g_i = 0`` the
  orbit lies in the type ``(m, x + 1, y)`` of ``a``, whose mass it carries a fraction
  ``(x + 1)/m`` of, and in the type ``(m - 1, x, y)`` of ``a'`` (fraction
  ``(n - m + 1 - y)/(n - m + 1)``); with ``g_i = 1`` in ``(m, x, y)`` (fraction ``(m - x)/m``)
  and ``(m - 1, x, y + 1)`` (fraction ``(y + 1)/(n - m + 1)``). The DP sum over g is the sum over
  orbits of the orbit's size times ``max(0, P(g | a) - e^eps P(g | a'))``, that is of
  ``max(0, f q - e^eps f' q')`` with the fractions ``f, f'`` and type masses ``q, q'`` above: one
  auxiliary variable per orbit and direction, and the program is exact, for ``delta > 0`` too
  (for ``delta = 0`` every orbit's term is simply ``<= 0``).

It has about ``n^3/6`` variables (5394 at ``n = 30``; four times as many with the auxiliary
variables of ``delta > 0``). With ``delta = 0`` HiGHS solves ``n = 20`` in under a second,
``n = 30`` in about 6 s and ``n = 40`` in one to two minutes.

What the values show. Randomised response on every coordinate (each bit kept with probability
``(e^eps + delta)/(1 + e^eps)``) is (eps, delta)-DP under flips and scores exactly that in
expectation under any prior, so the optimum is never below :func:`flip_formula`. With known
sizes it is above it by about ``c/n``, because two vectors with the same sizes are two flips
apart, not one (``c`` from 0.17 to 0.26 at ``eps = 1``, ``5 <= n <= 32`` and ``N0`` = 1, 2 or
n/2; 81.6% against 73.1% at ``n = 3``, ``N0 = 1``; 75.2% at ``n = 10``, ``N0 = 2``); with unknown
sizes the excess vanishes much faster (2e-5 at ``n = 20``). It is never above
:func:`group_privacy_formula` (a swap is two flips inside the universe once ``n >= 3``), except
at ``n = 2``, where the universe ``{01, 10}`` has no neighbours at all and the optimum is 1.
``empty_groups=True`` puts the two vectors with an empty group in the universe (as neighbours
only: they carry no prior mass, their balanced accuracy being undefined), which adds the flips
through them and lowers the optimum near the edges (75.1% at ``n = 10``, ``N0 = 2``).

Numerics: the coefficients span ``e^eps`` and the optimal masses go down to about ``e^{-n eps}``,
so epsilon is limited to :data:`MAX_EPSILON` (above it the optimum is within ``e^-12`` of 1), HiGHS
runs at tolerance 1e-9, and an optimum below the value of randomised response (a feasible point)
is rejected as a numerical failure and solved again by the other algorithm or tolerances. The
values agree with an independent interior-point solver (Clarabel) to 1e-9.
"""

from __future__ import annotations

import math
from typing import Final, Literal

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

__all__ = [
    "AUTO_FULL_MAX_N",
    "FULL_MAX_N",
    "MAX_EPSILON",
    "flip_formula",
    "group_privacy_formula",
    "optimal_balanced_accuracy",
]

FULL_MAX_N: Final = 6
"""Largest n the full program accepts (it has about ``4^n`` variables)."""

AUTO_FULL_MAX_N: Final = 5
"""Largest n at which ``method="auto"`` solves the full program (symmetric above)."""

SOLVER_OPTIONS: Final = {
    "primal_feasibility_tolerance": 1e-9,
    "dual_feasibility_tolerance": 1e-9,
}
"""HiGHS tolerances (default 1e-7): the optimal laws put masses down to ``e^{-n eps}`` on some
types, and at the default tolerances the optimum drifts by up to ~1e-8 at n = 30."""

MAX_EPSILON: Final = 12.0
"""Largest epsilon solved. The program's coefficients span ``e^eps`` and its optimal masses
``e^{-n eps}``, beyond what HiGHS resolves at larger epsilon (at 16 it reports wrong optima);
there the optimum lies in ``[flip_formula, 1]``, an interval narrower than ``e^-eps``."""

TIME_LIMIT: Final = 300.0
"""Seconds one HiGHS attempt may run before the next one is tried."""

BRACKET_SLACK: Final = 1e-8
"""How far below :func:`flip_formula` (the value of a feasible point) or above 1 a solver's
optimum may fall before it is rejected as a numerical failure."""

Method = Literal["auto", "full", "symmetric"]

Program = tuple[
    NDArray[np.float64],
    sparse.csr_array,
    NDArray[np.float64],
    sparse.csr_array,
    NDArray[np.float64],
]
"""(cost, A_ub, b_ub, A_eq, b_eq) of ``linprog``: minimise ``cost @ x`` over ``x >= 0``."""

BAD_N = "n must be an integer >= 2; received {n!r}"
BAD_EPSILON = "epsilon must be finite and >= 0; received {epsilon!r}"
BAD_DELTA = "delta must be in [0, 1); received {delta!r}"
BAD_N0 = "n0 must be None (unknown sizes) or an integer in [1, n - 1] = [1, {top}]; received {n0!r}"
BAD_METHOD = "method must be one of 'auto', 'full', 'symmetric'; received {method!r}"
FULL_TOO_LARGE = (
    "the full linear program has about 4^n variables and is limited to n <= {limit}; "
    "received n = {n} (use method='symmetric')"
)
EPSILON_TOO_LARGE = (
    "epsilon must be <= {limit} (beyond it the program is out of the solver's numerical range; "
    "the optimum is then within e^-epsilon of 1, between flip_formula and 1); received {epsilon!r}"
)
OUT_OF_BRACKET = (
    "HiGHS reported {value!r}, outside [{low!r}, 1] (randomised response, the flip formula, is "
    "feasible): a numerical failure"
)
LP_FAILED = "the linear program failed (n = {n}, epsilon = {epsilon}, delta = {delta}): {message}"


def flip_formula(epsilon: float, delta: float = 0.0) -> float:
    r"""Best accuracy of a test of one flip under (eps, delta)-DP, a fraction.

    .. math:: \frac{e^\varepsilon + \delta}{1 + e^\varepsilon},

    capped at 1. Randomised response on every coordinate reaches it as an expected balanced
    accuracy under any prior, so it is a lower bound on :func:`optimal_balanced_accuracy`.
    """
    _check_privacy(epsilon, delta)
    # written with e^-eps so that a large epsilon does not overflow
    return min(1.0, (1.0 + delta * math.exp(-epsilon)) / (1.0 + math.exp(-epsilon)))


def group_privacy_formula(epsilon: float, delta: float = 0.0) -> float:
    r""":func:`flip_formula` at the group-privacy guarantee of two flips, a fraction.

    .. math:: \frac{e^{2\varepsilon} + (1 + e^\varepsilon)\delta}{1 + e^{2\varepsilon}},

    capped at 1: the best test of a swap (two flips), an upper bound on the expected balanced
    accuracy of an attacker that knows the group sizes when ``n >= 3``.
    """
    _check_privacy(epsilon, delta)
    group_delta = (1.0 + math.exp(epsilon)) * delta if epsilon < 700.0 else math.inf
    if group_delta >= 1.0:
        return 1.0
    return flip_formula(2.0 * epsilon, group_delta)


def optimal_balanced_accuracy(
    n: int,
    epsilon: float,
    delta: float = 0.0,
    *,
    n0: int | None = None,
    method: Method = "auto",
    empty_groups: bool = False,
) -> float:
    """The largest expected balanced accuracy of an attacker of an (eps, delta)-DP release.

    Parameters
    ----------
    n : number of people (>= 2)
    epsilon, delta : the release's guarantee for one flip (``0 <= epsilon <= 12``,
        ``0 <= delta < 1``)
    n0 : the number of people in group 0 when the attacker knows the sizes (``a`` is then uniform
        among the vectors with ``n0`` zeros), or None for unknown sizes (``a`` uniform over every
        vector with both groups non-empty)
    method : ``"full"`` (every ``P(g | a)``, ``n <= 6``), ``"symmetric"`` (the permutation
        symmetric program over joint types, see the module docstring) or ``"auto"`` (full for
        ``n <= 5``, symmetric above)
    empty_groups : put the two vectors with an empty group in the universe, as neighbours that
        carry no prior mass (by default they are outside it, so flips into them are not
        constrained)

    Returns
    -------
    float
        The optimum as a fraction in [0.5, 1] (clipped there against solver round-off).

    Raises
    ------
    ValueError
        On an invalid argument, ``epsilon > MAX_EPSILON`` (12), or ``method="full"`` with
        ``n > FULL_MAX_N`` (6).
    RuntimeError
        When no HiGHS attempt reports an optimum at least the value of randomised response.
    """
    _check_size(n, n0)
    _check_privacy(epsilon, delta)
    if epsilon > MAX_EPSILON:
        raise ValueError(EPSILON_TOO_LARGE.format(limit=MAX_EPSILON, epsilon=epsilon))
    if method not in ("auto", "full", "symmetric"):
        raise ValueError(BAD_METHOD.format(method=method))
    if method == "full" and n > FULL_MAX_N:
        raise ValueError(FULL_TOO_LARGE.format(limit=FULL_MAX_N, n=n))
    full = method == "full" or (method == "auto" and n <= AUTO_FULL_MAX_N)
    build = _full_program if full else _symmetric_program
    program = build(n, math.exp(epsilon), delta, n0, empty_groups)
    # HiGHS's interior point is several times faster on the full program and on the symmetric
    # one with delta > 0 (where its dual simplex can stall, at epsilon = 0 for one); its dual
    # simplex is faster on the symmetric one with delta = 0
    first = "highs" if not full and delta == 0.0 else "highs-ipm"
    value, message = _solve(program, first, flip_formula(epsilon, delta))
    if value is None:
        raise RuntimeError(LP_FAILED.format(n=n, epsilon=epsilon, delta=delta, message=message))
    return min(1.0, max(0.5, value))


def _solve(program: Program, method: str, low: float) -> tuple[float | None, str]:
    """The optimum, by HiGHS at tight tolerances, then at its defaults, each algorithm in turn.

    ``method`` goes first, each attempt stops after :data:`TIME_LIMIT` seconds (a stalled
    simplex hands over to the interior point). An optimum is accepted only in ``[low, 1]`` up to
    :data:`BRACKET_SLACK`, ``low`` the value of randomised response (:func:`flip_formula`, a
    feasible point): this catches a solver that reports an optimum it lost precision on. Returns
    ``(value, "")``, or ``(None, why)`` when every attempt failed.
    """
    cost, a_ub, b_ub, a_eq, b_eq = program
    other = "highs-ds" if method == "highs-ipm" else "highs-ipm"
    why = ""
    for tolerances in (SOLVER_OPTIONS, {}):
        for algorithm in (method, other):
            result = optimize.linprog(
                cost,
                A_ub=a_ub,
                b_ub=b_ub,
                A_eq=a_eq,
                b_eq=b_eq,
                bounds=(0, None),
                method=algorithm,
                options={**tolerances, "time_limit": TIME_LIMIT},
            )
            if result.status != 0:
                why = str(result.message)
                continue
            value = float(-result.fun)
            if low - BRACKET_SLACK <= value <= 1.0 + BRACKET_SLACK:
                return value, ""
            why = OUT_OF_BRACKET.format(value=value, low=low)
    return None, why


# --- validation ---------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _check_size(n: int, n0: int | None) -> None:
    if not _is_int(n) or n < 2:
        raise ValueError(BAD_N.format(n=n))
    if n0 is not None and (not _is_int(n0) or not 1 <= n0 <= n - 1):
        raise ValueError(BAD_N0.format(top=n - 1, n0=n0))


def _check_privacy(epsilon: float, delta: float) -> None:
    if (
        not isinstance(epsilon, int | float | np.number)
        or not math.isfinite(epsilon)
        or epsilon < 0
    ):
        raise ValueError(BAD_EPSILON.format(epsilon=epsilon))
    if not isinstance(delta, int | float | np.number) or not 0.0 <= delta < 1.0:
        raise ValueError(BAD_DELTA.format(delta=delta))


# --- the programs -------------------------------------------------------------------------------


def _zeros_range(n: int, empty_groups: bool) -> range:
    """The numbers of zeros of the vectors in the universe."""
    return range(0, n + 1) if empty_groups else range(1, n)


def _size_weights(n: int, n0: int | None) -> dict[int, float]:
    """The prior's mass on the vectors with m zeros, for every m it puts mass on."""
    if n0 is not None:
        return {n0: 1.0}
    total = 2.0**n - 2.0
    return {m: math.comb(n, m) / total for m in range(1, n)}


def _dp_rows(
    pos: NDArray[np.int64],
    neg: NDArray[np.int64],
    pos_coef: NDArray[np.float64],
    neg_coef: NDArray[np.float64],
    group: NDArray[np.int64],
    n_vars: int,
    exp_eps: float,
    delta: float,
) -> tuple[sparse.csr_array, NDArray[np.float64]]:
    r"""Inequality rows of the DP terms ``pos_coef x[pos] - e^eps neg_coef x[neg]``.

    Every term is one guess (or orbit of guesses) of one ordered neighbour pair, ``group`` the
    pair's index. For ``delta = 0`` each term is ``<= 0``; for ``delta > 0`` each term gets an
    auxiliary variable ``t >= term`` (appended after the ``n_vars`` variables, ``t >= 0`` by the
    bounds) and each pair a row ``sum t <= delta``.
    """
    k = pos.size
    rows = np.arange(k)
    if k == 0:  # no neighbours (n = 2 without the empty groups)
        return sparse.csr_array((0, n_vars)), np.zeros(0)
    if delta == 0.0:
        data = np.concatenate([pos_coef, -exp_eps * neg_coef])
        a_ub = sparse.coo_array(
            (data, (np.concatenate([rows, rows]), np.concatenate([pos, neg]))), shape=(k, n_vars)
        )
        return a_ub.tocsr(), np.zeros(k)
    n_groups = int(group.max()) + 1
    t = n_vars + rows
    data = np.concatenate([pos_coef, -exp_eps * neg_coef, -np.ones(k), np.ones(k)])
    r = np.concatenate([rows, rows, rows, k + group])
    c = np.concatenate([pos, neg, t, t])
    a_ub = sparse.coo_array((data, (r, c)), shape=(k + n_groups, n_vars + k))
    b_ub = np.concatenate([np.zeros(k), np.full(n_groups, delta)])
    return a_ub.tocsr(), b_ub


def _finish(
    cost: NDArray[np.float64],
    a_ub: sparse.csr_array,
    b_ub: NDArray[np.float64],
    eq_rows: NDArray[np.int64],
    n_eq: int,
) -> Program:
    """Pad the cost and the equality rows with the auxiliary variables of ``a_ub``."""
    n_vars = cost.size
    total = a_ub.shape[1]
    cost = np.concatenate([cost, np.zeros(total - n_vars)])
    cols = np.arange(n_vars)
    a_eq = sparse.coo_array((np.ones(n_vars), (eq_rows, cols)), shape=(n_eq, total)).tocsr()
    return cost, a_ub, b_ub, a_eq, np.ones(n_eq)


def _full_program(
    n: int, exp_eps: float, delta: float, n0: int | None, empty_groups: bool
) -> Program:
    """Every ``P(g | a)``: variable ``index(a) * 2^n + g``."""
    size = 1 << n
    vectors = np.arange(size)
    bits = (vectors[:, None] >> np.arange(n)) & 1  # (2^n, n): bit i of each vector
    zeros = n - bits.sum(axis=1)
    ok = (zeros >= 0) if empty_groups else ((zeros >= 1) & (zeros <= n - 1))
    universe = vectors[ok]
    index = np.full(size, -1)
    index[universe] = np.arange(universe.size)
    n_vars = universe.size * size

    # objective: - prior(a) BA(g, a), for the a the prior weighs
    cost = np.zeros(n_vars)
    weights = _size_weights(n, n0)
    for a in universe:
        m = int(zeros[a])
        if m not in weights:
            continue
        ones_hit = (bits & bits[a]).sum(axis=1)  # a_i = g_i = 1
        zeros_hit = ((1 - bits) & (1 - bits[a])).sum(axis=1)  # a_i = g_i = 0
        ba = 0.5 * (ones_hit / (n - m) + zeros_hit / m)
        start = index[a] * size
        cost[start : start + size] = -weights[m] / math.comb(n, m) * ba

    # ordered neighbour pairs (a, a') in the universe, one flip apart
    a_from = np.repeat(universe, n)
    a_to = a_from ^ np.tile(1 << np.arange(n), universe.size)
    keep = index[a_to] >= 0
    a_from, a_to = a_from[keep], a_to[keep]
    n_pairs = a_from.size
    guess = np.tile(vectors, n_pairs)
    group = np.repeat(np.arange(n_pairs), size)
    pos = np.repeat(index[a_from], size) * size + guess
    neg = np.repeat(index[a_to], size) * size + guess
    unit = np.ones(pos.size)
    a_ub, b_ub = _dp_rows(pos, neg, unit, unit, group, n_vars, exp_eps, delta)
    return _finish(cost, a_ub, b_ub, np.repeat(np.arange(universe.size), size), universe.size)


def _symmetric_program(
    n: int, exp_eps: float, delta: float, n0: int | None, empty_groups: bool
) -> Program:
    """The type masses ``q(m, j0, j1)`` of a permutation-symmetric law (module docstring)."""
    ms = _zeros_range(n, empty_groups)
    offset: dict[int, int] = {}
    count = 0
    for m in ms:
        offset[m] = count
        count += (m + 1) * (n - m + 1)

    def var(m: int, j0: NDArray[np.int64], j1: NDArray[np.int64]) -> NDArray[np.int64]:
        return offset[m] + j0 * (n - m + 1) + j1

    cost = np.zeros(count)
    eq_rows = np.zeros(count, dtype=np.int64)
    weights = _size_weights(n, n0)
    for row, m in enumerate(ms):
        j0, j1 = np.meshgrid(np.arange(m + 1), np.arange(n - m + 1), indexing="ij")
        idx = var(m, j0.ravel(), j1.ravel())
        eq_rows[idx] = row
        if m in weights:
            cost[idx] = -weights[m] * 0.5 * (j0.ravel() / m + j1.ravel() / (n - m))

    # orbits of the pair (a with m zeros, a' = a with zero i flipped to 1)
    empty_int, empty_float = np.zeros(0, dtype=np.int64), np.zeros(0)
    pos_parts: list[NDArray[np.int64]] = [empty_int]
    neg_parts: list[NDArray[np.int64]] = [empty_int]
    pos_coef: list[NDArray[np.float64]] = [empty_float]
    neg_coef: list[NDArray[np.float64]] = [empty_float]
    group_parts: list[NDArray[np.int64]] = [empty_int]
    n_groups = 0
    for m in ms:
        if m - 1 not in offset:
            continue
        xx, yy = np.meshgrid(np.arange(m), np.arange(n - m + 1), indexing="ij")
        x, y = xx.ravel(), yy.ravel()
        ones_after = n - m + 1
        # g_i = 0: type (m, x + 1, y) of a, type (m - 1, x, y) of a'
        # g_i = 1: type (m, x, y) of a, type (m - 1, x, y + 1) of a'
        a_var = np.concatenate([var(m, x + 1, y), var(m, x, y)])
        a_frac = np.concatenate([(x + 1) / m, (m - x) / m])
        b_var = np.concatenate([var(m - 1, x, y), var(m - 1, x, y + 1)])
        b_frac = np.concatenate([(ones_after - y) / ones_after, (y + 1) / ones_after])
        for p_var, p_frac, n_var, n_frac in (
            (a_var, a_frac, b_var, b_frac),
            (b_var, b_frac, a_var, a_frac),
        ):
            pos_parts.append(p_var)
            neg_parts.append(n_var)
            pos_coef.append(p_frac)
            neg_coef.append(n_frac)
            group_parts.append(np.full(p_var.size, n_groups))
            n_groups += 1
    a_ub, b_ub = _dp_rows(
        np.concatenate(pos_parts),
        np.concatenate(neg_parts),
        np.concatenate(pos_coef),
        np.concatenate(neg_coef),
        np.concatenate(group_parts),
        count,
        exp_eps,
        delta,
    )
    return _finish(cost, a_ub, b_ub, eq_rows, len(ms))
