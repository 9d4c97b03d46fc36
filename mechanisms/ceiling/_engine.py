r"""Composing dominating pairs, for one person or for every person at once.

Releases with independent noise compose: the privacy-loss random variable of the whole
transcript is the sum of the releases' losses, each drawn under its own P, so its law is the
convolution of theirs. Each pair is first replaced by its connect-the-dots law on a loss grid
(:func:`~biasleak.mechanisms.ceiling._pairs.connect_the_dots`), which dominates it; the laws of a
person's releases are convolved through the discrete Fourier transform: with ``c_k`` releases of
pair k, the transform of the composition is ``prod_k Phi_k^{c_k}``, which for everyone at once is
one matrix product of the count matrix with the logarithms of the transforms, then one inverse
transform per person.

Three things make the result a bound and not an estimate:

1. **Domination.** Every pair is replaced by a pair that dominates it, and composing dominating
   pairs gives a pair that dominates the composition (adaptivity included: Dong, Roth and Su
   2022, Theorem 3.2); every hockey-stick divergence computed is therefore an upper bound.
2. **A window.** A transform of length G holds the sum only modulo G grid steps. Each person's
   window is centred on the mean of the sum and is wide enough that, by Bernstein's or
   Hoeffding's inequality for bounded independent summands (the smaller radius), less than
   :data:`TAIL` of the mass lies outside it; mass
   outside lands somewhere inside (at most ``TAIL`` more on every divergence), and the missing
   mass outside counts in full, so :data:`TAIL` is added to every divergence.
3. **Round-off.** The inverse transform is exact up to floating-point error of order
   ``G 2^-52``; negative values are cleared and :data:`ROUND_OFF` times G is added.

The grid step is chosen per person from the spread of the sum (a fixed fraction of its standard
deviation), so a person whose releases are tiny is not composed on a grid made for a person whose
releases are large: people are grouped by octave of that spread and each group gets its own grid.

People with the same counts share one composition. Past :data:`MAX_DISTINCT` distinct people (a
whole population of tens of thousands, each with a different mix of thousands of releases),
alike people are grouped and each group is composed once under an envelope ledger that
dominates every member's (see ``_envelopes``): still a bound for everyone, a little looser (on
the whole Adult population with 20,000 answers, the mean bound rises from 0.497% to 0.504%
total variation), and about seven times faster.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from threadpoolctl import ThreadpoolController

from biasleak.mechanisms.ceiling._pairs import Discretized, Pair, connect_the_dots

__all__ = ["NOTHING", "ROUND_OFF", "TAIL", "Law", "PeopleLoss", "compose_law", "compose_people"]

TAIL: Final = 1e-12
"""Largest probability left outside a person's window, added to every divergence."""

ROUND_OFF: Final = 1e-14
"""Round-off allowance per transform point, added (times the transform length) to divergences."""

RESOLUTION: Final = 64
"""Grid points per standard deviation of a person's total privacy loss (at least), for many
people at once (relative errors of a few 1e-5 against a finer grid)."""

LIGHT_SHARE: Final = 0.01
"""Share of a person's variance that merged light releases may carry (see _merge_light)."""

LIGHT_RATIO: Final = 1.25
"""Largest ratio of shifts merged onto one pair."""

PER_LOSS: Final = 4
"""Grid points per largest loss of the release that spreads a person's sum most (at least), for
many people at once; SINGLE_PER_LOSS for few."""

SINGLE_PER_LOSS: Final = 8

MAX_POINTS: Final = 1 << 15
"""Longest transform for many people at once (a single composition may use SINGLE_POINTS)."""

SINGLE_POINTS: Final = 1 << 20
"""Longest transform when few people are composed (the ceilings of a whole policy)."""

SINGLE_RESOLUTION: Final = 2000
"""Grid points per standard deviation when few people are composed."""

MAX_DISTINCT: Final = 4096
"""Most distinct people composed one by one; more are composed in this many groups of alike
people, each under a ledger that dominates its members' (see _envelopes)."""

CHUNK_CELLS: Final = 1 << 22
"""People x transform points held at once (complex doubles: 64 MiB)."""


@dataclass(frozen=True)
class PeopleLoss:
    """Per-person bounds on hockey-stick divergences of a composition."""

    total_variation: NDArray[np.float64]
    """(n,) upper bound on the total variation between each person's two worlds."""
    hockey: NDArray[np.float64] | None
    """(n, e) upper bounds on ``H_{e^eps}`` at the requested epsilons, or None."""


def _bernstein_radius(
    variance: NDArray[np.float64], bound: NDArray[np.float64]
) -> NDArray[np.float64]:
    """R with ``P(|S - E S| >= R) <= TAIL`` for a sum of independent summands of total variance
    ``variance`` each within ``bound`` of its mean (Bernstein's inequality)."""
    log_term = math.log(2.0 / TAIL)
    a = bound * log_term / 3.0
    return a + np.sqrt(a * a + 2.0 * variance * log_term)


@dataclass(frozen=True, eq=False)
class Law:
    """The composed privacy-loss law of one person: grid losses, their masses, the rest."""

    loss: NDArray[np.float64]
    """Grid losses (ascending)."""
    masses: NDArray[np.float64]
    """Probability of each grid loss (an upper bound's worth: see the module docstring)."""
    infinite: float
    """Probability of an outcome the other world cannot produce."""
    allowance: float
    """Window tail and round-off added to every divergence."""
    exact: bool = False
    """Whether some release gave no guarantee (then every divergence is 1)."""

    def hockey_stick(self, epsilons: ArrayLike) -> NDArray[np.float64]:
        r"""Upper bounds on :math:`H_{e^\varepsilon}(P \| Q)` at each epsilon.

        ``H = inf + sum_{l > eps} m_l (1 - e^{eps - l})``: with the losses sorted, two suffix
        sums (of ``m_l`` and of ``m_l e^{-l}``) give it for any epsilon in a binary search.
        """
        eps = np.asarray(epsilons, dtype=np.float64)
        if self.exact:
            return np.ones_like(eps)
        mass_above, weighted_above = self._suffix_sums
        flat = eps.reshape(-1)
        first = np.searchsorted(self.loss, flat, side="right")  # the first loss above eps
        with np.errstate(over="ignore", invalid="ignore"):
            tail = mass_above[first] - np.exp(np.minimum(flat, 700.0)) * weighted_above[first]
        for i in np.flatnonzero(~np.isfinite(tail)):  # a sum that overflowed: term by term
            above = self.loss > flat[i]
            tail[i] = float((self.masses[above] * -np.expm1(flat[i] - self.loss[above])).sum())
        values = self.infinite + np.maximum(tail, 0.0) + self.allowance
        floor = np.maximum(0.0, -np.expm1(np.minimum(flat, 0.0)))  # what P = Q would give
        return np.clip(np.maximum(values, floor), 0.0, 1.0).reshape(eps.shape)

    @cached_property
    def _suffix_sums(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Sums of the masses, and of the masses times ``e^{-loss}``, from each index to the end
        (one more entry, 0, for "no loss above"). Very negative losses may overflow to inf in
        the second; those entries are read only for epsilons far below every query's."""
        with np.errstate(over="ignore"):
            weighted = self.masses * np.exp(-self.loss)
        mass = np.concatenate([np.cumsum(self.masses[::-1])[::-1], [0.0]])
        scaled = np.concatenate([np.cumsum(weighted[::-1])[::-1], [0.0]])
        return mass, scaled

    @property
    def total_variation(self) -> float:
        """Upper bound on the total variation between the two worlds."""
        return float(self.hockey_stick(np.array([0.0]))[0])

    def epsilon_for_delta(self, delta: float) -> float:
        """The smallest epsilon whose hockey-stick bound is at most ``delta`` (``inf`` if none)."""
        if self.exact or self.infinite + self.allowance > delta:
            return math.inf
        if self.loss.size == 0:
            return 0.0
        lo, hi = 0.0, max(float(self.loss[-1]), 0.0)
        if self.hockey_stick(np.array([lo]))[0] <= delta:
            return 0.0
        for _ in range(4):  # the profile decreases in epsilon: narrow down 64 points at a time
            grid = np.linspace(lo, hi, 65)
            ok = self.hockey_stick(grid) <= delta
            first = int(np.argmax(ok)) if ok.any() else 64
            lo, hi = float(grid[max(first - 1, 0)]), float(grid[first])
        return hi


NOTHING: Final = Law(np.zeros(1), np.ones(1), 0.0, 0.0)
"""The law of no release at all (the two worlds are the same)."""


_CONTROLLERS: list[ThreadpoolController] = []
"""The native thread pools, found once (looking them up costs milliseconds per call once
scikit-learn and SciPy are loaded); NumPy's BLAS, which the products here use, is loaded before
any call."""


def _one_blas_thread(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``function`` with one BLAS thread: a matrix product split over threads sums in
    another order, and the same run must give the same bits on any machine (same scenario and
    seed, same log)."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not _CONTROLLERS:
            _CONTROLLERS.append(ThreadpoolController())
        with _CONTROLLERS[0].limit(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return wrapper


@_one_blas_thread
def compose_law(pairs: Sequence[Pair], counts: Sequence[int]) -> Law:
    """One person's composed law after ``counts[k]`` releases of ``pairs[k]``."""
    c = np.asarray([list(counts)], dtype=np.int64).reshape(1, len(pairs))
    laws = list(_laws(pairs, c, SINGLE_POINTS, SINGLE_RESOLUTION, SINGLE_PER_LOSS))
    if not laws:
        exact = any(p.saturated and k > 0 for p, k in zip(pairs, counts, strict=True))
        return Law(np.zeros(1), np.ones(1), 0.0, 0.0, exact=exact)
    block = laws[0]
    if block.exact[0]:
        return Law(np.zeros(1), np.ones(1), 0.0, 0.0, exact=True)
    masses = block.masses[0]
    keep = masses > 0.0  # the grid's empty points add nothing to any divergence
    loss = (block.base[0] + np.arange(masses.size)) * block.step
    return Law(loss[keep], masses[keep], float(block.infinite[0]), block.allowance)


@_one_blas_thread
def compose_people(
    pairs: Sequence[Pair],
    counts: ArrayLike,
    *,
    epsilons: ArrayLike | None = None,
) -> PeopleLoss:
    r"""Bound each person's divergences after ``counts[i, k]`` releases of ``pairs[k]``.

    Parameters
    ----------
    pairs : the K distinct pairs
    counts : (n, K) non-negative integers
    epsilons : optional (e,) or (n, e) epsilons at which to bound :math:`H_{e^\varepsilon}`
        (per person when 2-d), besides the total variation (epsilon 0)

    Returns
    -------
    PeopleLoss
        Upper bounds; a person with any saturated (exact) release gets 1 everywhere.
    """
    c = _check_counts(pairs, counts)
    n = c.shape[0]
    eps = None if epsilons is None else np.asarray(epsilons, dtype=np.float64)
    if eps is not None and eps.ndim == 1:
        eps = np.broadcast_to(eps, (n, eps.size))
    if n > 1:  # people with the same counts (and epsilons) have the same law: compose it once
        key = c if eps is None else np.concatenate([c.astype(np.float64), eps], axis=1)
        first, inverse = _unique_rows(key)
        if first.size > MAX_DISTINCT:  # too many to compose one by one: under envelopes
            group, c_env, eps_env = _envelopes(pairs, c[first], None if eps is None else eps[first])
            first, inverse = np.arange(c_env.shape[0]), group[inverse.reshape(-1)]
            c, eps = c_env, eps_env
        if first.size < n:
            inner = compose_people(pairs, c[first], epsilons=None if eps is None else eps[first])
            inverse = inverse.reshape(-1)
            return PeopleLoss(
                inner.total_variation[inverse],
                None if inner.hockey is None else inner.hockey[inverse],
            )
    tv = np.zeros(n)
    hockey = None if eps is None else np.maximum(0.0, -np.expm1(np.minimum(eps, 0.0))).copy()
    limit, resolution, per_loss = (
        (SINGLE_POINTS, SINGLE_RESOLUTION, SINGLE_PER_LOSS)
        if n <= 8
        else (MAX_POINTS, RESOLUTION, PER_LOSS)
    )
    for block in _laws(pairs, c, limit, resolution, per_loss):
        who = block.who
        tv[who] = np.where(block.exact, 1.0, block.hockey(np.zeros(who.size)))
        if eps is not None and hockey is not None:
            h = np.stack([block.hockey(eps[who, j]) for j in range(eps.shape[1])], axis=1)
            hockey[who] = np.where(block.exact[:, None], 1.0, np.maximum(h, hockey[who]))
    return PeopleLoss(np.minimum(tv, 1.0), None if hockey is None else np.minimum(hockey, 1.0))


def _envelopes(
    pairs: Sequence[Pair], c: NDArray[np.int64], eps: NDArray[np.float64] | None
) -> tuple[NDArray[np.intp], NDArray[np.int64], NDArray[np.float64] | None]:
    """(group of each row, each group's envelope counts, each group's epsilons): the rows of
    ``c`` in at most :data:`MAX_DISTINCT` groups, each composed once under a ledger that
    dominates every member's.

    Rows are sorted by their epsilons, then by the spread of their total loss, and cut into
    groups of consecutive rows, so that a group holds people whose releases weigh alike. Within
    a family whose pairs are ordered by domination (``laplace``, ``cauchy``, ``pure``: a larger
    parameter dominates, see :mod:`~biasleak.mechanisms.ceiling._pairs`), the envelope's number
    of releases at parameter p or more is the largest member's: each member's releases can then
    be matched one to one with the envelope's at an equal or larger parameter (Hall's condition
    is exactly that inequality, checked from the largest parameter down), each matched pair
    dominates, and the envelope's unmatched releases only add to what an attacker sees (dropping
    them is post-processing). Every other pair (``approx``, ``exact``) takes the largest count of
    the group. So the envelope's composition dominates each member's, and its divergences bound
    theirs; at the smallest epsilon of the group's members, since a hockey-stick divergence
    decreases in epsilon.
    """
    rows = c.shape[0]
    var = np.array(
        [
            0.0
            if p.saturated or p.trivial
            else connect_the_dots(p, p.max_loss / 64.0).variance * (p.max_loss / 64.0) ** 2
            for p in pairs
        ]
    )
    spread = c.astype(np.float64) @ var
    keys = [spread] if eps is None else [spread, *eps.T[::-1]]
    order = np.lexsort(keys)  # epsilons first, then the spread
    size = -(-rows // MAX_DISTINCT)
    starts = np.arange(0, rows, size)
    group = np.empty(rows, dtype=np.intp)
    group[order] = np.arange(rows) // size
    sorted_counts = c[order]
    envelope = np.empty((starts.size, len(pairs)), dtype=np.int64)
    chains: dict[str, list[int]] = {}
    for k, p in enumerate(pairs):
        if p.family in ("laplace", "cauchy", "pure") and p.delta == 0.0:
            chains.setdefault(p.family, []).append(k)
        else:
            chains[f"single {k}"] = [k]
    for columns in chains.values():
        columns.sort(key=lambda k: -pairs[k].parameter)  # the largest parameter first
        at_least = np.cumsum(sorted_counts[:, columns], axis=1)
        top = np.maximum.reduceat(at_least, starts, axis=0)
        envelope[:, columns] = np.diff(top, axis=1, prepend=0)
    eps_env = None if eps is None else np.minimum.reduceat(eps[order], starts, axis=0)
    return group, envelope, eps_env


def _unique_rows(key: NDArray[Any]) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """(first, inverse) of the distinct rows of ``key``: ``key[first][inverse] == key``.

    Rows are compared as raw bytes (one 1-d sort instead of a lexicographic one); the rows
    are integers or floats without NaN, whose equal values have equal bytes except -0.0 and
    0.0, which only makes two equal rows distinct (composed twice, to the same law).
    """
    rows = np.ascontiguousarray(key)
    if rows.shape[1] == 0:
        return np.zeros(1 if rows.shape[0] else 0, dtype=np.intp), np.zeros(
            rows.shape[0], dtype=np.intp
        )
    raw = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    return first, inverse.reshape(-1)


@dataclass(frozen=True)
class _Block:
    """Composed laws of a block of people on one grid: person i's mass ``masses[i, k]`` sits at
    the loss ``(base[i] + k) * step``."""

    who: NDArray[np.int64]
    base: NDArray[np.int64]
    masses: NDArray[np.float64]
    step: float
    infinite: NDArray[np.float64]
    allowance: float
    exact: NDArray[np.bool_]

    def hockey(self, epsilons: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per person, the bound on ``H_{e^eps}`` at that person's epsilon.

        The weight ``(1 - e^{eps - loss})_+`` at grid point k is ``(1 - c e^{-k step})_+`` with
        ``c = e^{eps - base step}``: one exponential per person and one per grid point. The
        exponent of c is capped at 700; a capped c is smaller, which only raises the bound.
        """
        if self.masses.shape[1] == 0:
            return np.where(self.exact, 1.0, self.infinite)
        decay = np.exp(-self.step * np.arange(self.masses.shape[1]))
        c = np.exp(np.minimum(epsilons - self.base * self.step, 700.0))
        weight = np.maximum(0.0, 1.0 - c[:, None] * decay[None, :])
        return self.infinite + (self.masses * weight).sum(axis=1) + self.allowance


def _check_counts(pairs: Sequence[Pair], counts: ArrayLike) -> NDArray[np.int64]:
    c = np.asarray(counts)
    if c.ndim != 2 or c.shape[1] != len(pairs):
        raise ValueError(f"counts must be (n, {len(pairs)}); received shape {c.shape}")
    if c.size and (not np.issubdtype(c.dtype, np.integer) or c.min() < 0):
        raise ValueError("counts must be non-negative integers")
    return c.astype(np.int64, copy=False)


def _laws(
    pairs: Sequence[Pair], c: NDArray[np.int64], limit: int, resolution: int, per_loss: float
) -> Iterator[_Block]:
    """The composed laws of every person with some release, block by block.

    People with no live release are skipped (their divergences are those of P = Q); people with
    a saturated release come back flagged exact.
    """
    n = c.shape[0]
    saturated = np.array([p.saturated for p in pairs], dtype=bool)
    live = np.array([not (p.saturated or p.trivial) for p in pairs], dtype=bool)
    exact_people = (c[:, saturated] > 0).any(axis=1) if saturated.any() else np.zeros(n, bool)
    if exact_people.any():
        who = np.flatnonzero(exact_people)
        yield _Block(
            who,
            np.zeros(who.size, dtype=np.int64),
            np.zeros((who.size, 0)),
            1.0,
            np.ones(who.size),
            0.0,
            np.ones(who.size, dtype=bool),
        )
    keep = np.flatnonzero(live)
    if not keep.size:
        return
    use = ~exact_people & (c[:, keep] > 0).any(axis=1)
    if not use.any():
        return
    live_pairs = [pairs[k] for k in keep]
    cc = c[np.ix_(use, keep)].astype(np.float64)
    people = np.flatnonzero(use)
    # the spread of each person's total loss, from a fine discretisation of every pair
    fine_step = np.array([p.max_loss / 64.0 for p in live_pairs])
    var_k = (
        np.array(
            [connect_the_dots(p, h).variance for p, h in zip(live_pairs, fine_step, strict=True)]
        )
        * fine_step**2
    )
    live_pairs, cc, var_k = _merge_light(live_pairs, cc, var_k)
    sd = np.maximum(np.sqrt(cc @ var_k), 1e-300)
    # people whose spreads are within a factor 2 share one grid
    octave = np.floor(np.log2(sd)).astype(np.int64)
    for level in np.unique(octave):
        rows = np.flatnonzero(octave == level)
        used = np.flatnonzero((cc[rows] > 0).any(axis=0))  # the releases these people got
        # fine against the spread of the sum, and against the largest loss of the release that
        # spreads it most (a grid coarser than a release's losses inflates its spread); aligned
        # with that loss, so that its atoms (Laplace and randomized response put mass there)
        # sit on grid points
        group_pairs = [live_pairs[k] for k in used]
        block = cc[np.ix_(rows, used)]
        main = group_pairs[int(np.argmax((block * var_k[used]).sum(axis=0)))].max_loss
        step = min(float(sd[rows].max()) / resolution, main / per_loss)
        step = main / math.ceil(main / step)
        yield from _group(group_pairs, block, people[rows], step, limit)


def _merge_light(
    pairs: list[Pair], counts: NDArray[np.float64], var: NDArray[np.float64]
) -> tuple[list[Pair], NDArray[np.float64], NDArray[np.float64]]:
    """Merge the releases that weigh little in everyone's sum onto a few coarser pairs.

    Per family, the smallest shifts are visited first; a release joins the merged ones while,
    for every person, the merged releases carry at most :data:`LIGHT_SHARE` of the variance of
    that person's sum. Merged releases of one bucket (shifts within a factor
    :data:`LIGHT_RATIO`) become the bucket's largest shift: rounding a shift up is always valid,
    and it inflates at most a ``LIGHT_SHARE`` share of the variance by at most ``LIGHT_RATIO^2``.
    """
    total = counts @ var
    share = counts * var[None, :] / np.maximum(total, 1e-300)[:, None]
    groups: dict[str, list[int]] = {}
    for k, p in enumerate(pairs):
        if p.family in ("laplace", "cauchy"):
            groups.setdefault(p.family, []).append(k)
    target = list(range(len(pairs)))  # where each column goes
    merged_pair: dict[int, Pair] = {}
    for family, columns in groups.items():
        columns.sort(key=lambda k: pairs[k].parameter)
        spent = np.zeros(counts.shape[0])
        head = -1
        for k in columns:
            if np.any(spent + share[:, k] > LIGHT_SHARE):
                break
            spent += share[:, k]
            if head < 0 or pairs[k].parameter > LIGHT_RATIO * pairs[head].parameter:
                head = k  # a new bucket starts here
            target[k] = head
            merged_pair[head] = Pair(family, pairs[k].parameter)  # type: ignore[arg-type]
    heads = sorted(set(target))
    if len(heads) == len(pairs):
        return pairs, counts, var
    index = {h: i for i, h in enumerate(heads)}
    out = np.zeros((counts.shape[0], len(heads)))
    for k, h in enumerate(target):
        out[:, index[h]] += counts[:, k]
    new_pairs = [merged_pair.get(h, pairs[h]) for h in heads]
    new_var = np.array(
        [
            var[h]
            if h not in merged_pair
            else var[h] * (new_pairs[i].parameter / pairs[h].parameter) ** 2
            for i, h in enumerate(heads)
        ]
    )
    return new_pairs, out, new_var


def _group(
    pairs: Sequence[Pair],
    counts: NDArray[np.float64],
    people: NDArray[np.int64],
    step: float,
    limit: int,
) -> Iterator[_Block]:
    """Compose one group of people on one grid."""
    while True:
        laws = [connect_the_dots(p, step) for p in pairs]
        lo, hi = _windows(laws, counts)
        length = int((hi - lo).max()) + 1
        points = 1 << max(4, (length - 1).bit_length())
        if points <= limit:
            break
        step *= 2.0 * points / limit  # a coarser grid: looser, never wrong
    # the logarithms of the transforms, as modulus and phase: the counts are real, so the two
    # matrix products are real too (half the work of a complex product). The laws are real, so
    # their transforms are Hermitian and so is any product of their powers: the half spectrum
    # (rfft) holds everything, and irfft returns the real masses (half the work again)
    placed = np.zeros((len(laws), points))
    for k, law in enumerate(laws):
        np.add.at(placed[k], (law.offset + np.arange(law.masses.size)) % points, law.masses)
    spectrum = np.fft.rfft(placed, axis=1)
    # |Phi| can reach 0 at isolated frequencies; the floor keeps the logarithm finite, and its
    # effect (a power of 1e-300) is far below the round-off allowance
    log_modulus = np.log(np.maximum(np.abs(spectrum), 1e-300))
    phase = np.angle(spectrum)
    log_keep = np.log1p(-np.array([law.infinite for law in laws]))
    allowance = TAIL + ROUND_OFF * points
    chunk = max(1, CHUNK_CELLS // points)
    turn = 2.0 * np.pi * np.arange(points // 2 + 1) / points
    for start in range(0, counts.shape[0], chunk):
        stop = min(start + chunk, counts.shape[0])
        block = counts[start:stop]
        base = lo[start:stop]
        # multiplying the transform by e^{2 pi i base w / G} rolls the result by base, so that
        # position k holds the loss index base + k (the window starts at position 0)
        shift = np.mod(base, points)[:, None] * turn[None, :]
        spectra = np.exp(block @ log_modulus + 1j * (block @ phase + shift))
        masses = np.maximum(np.fft.irfft(spectra, n=points, axis=1), 0.0)
        infinite = -np.expm1(block @ log_keep)
        yield _Block(
            people[start:stop],
            base,
            masses,
            step,
            infinite,
            allowance,
            np.zeros(stop - start, dtype=bool),
        )


def _windows(
    laws: Sequence[Discretized], counts: NDArray[np.float64]
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Each person's window of grid indices (inclusive ends) holding all but TAIL of the sum."""
    mean = np.array([law.mean for law in laws])
    var = np.array([law.variance for law in laws])
    lo_k = np.array([law.offset for law in laws], dtype=np.float64)
    hi_k = np.array([law.offset + law.masses.size - 1 for law in laws], dtype=np.float64)
    centre = counts @ mean
    # Bernstein (variance and the largest deviation of the releases a person got) and Hoeffding
    # (the ranges) both bound the tail; the smaller radius is used
    deviation = np.maximum(hi_k - mean, mean - lo_k)
    spread = np.max(np.where(counts > 0, deviation[None, :], 0.0), axis=1)
    bernstein = _bernstein_radius(counts @ var, spread)
    hoeffding = np.sqrt(counts @ (hi_k - lo_k) ** 2 * math.log(2.0 / TAIL) / 2.0)
    radius = np.minimum(bernstein, hoeffding)
    lo = np.maximum(np.floor(centre - radius), counts @ lo_k).astype(np.int64)
    hi = np.minimum(np.ceil(centre + radius), counts @ hi_k).astype(np.int64)
    return lo, hi
