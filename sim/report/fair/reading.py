"""The reading that ends a fair-learning report, computed from its numbers: how far each private
service is from its non-private self at each eps, from which eps on it stays close, and how close
it comes to fairlearn's non-private references."""

from __future__ import annotations

import math

from biasleak.sim.fair.experiment import Outcome, select
from biasleak.sim.fair.settings import Settings
from biasleak.sim.report.fair.common import (
    CLOSE,
    REFERENCES,
    Rows,
    close_from,
    distance,
    from_text,
    gap_by_eps,
    group,
    mean_of,
    pct,
)
from biasleak.sim.report.stats import eps_label, fmt, stat

__all__ = ["reading_conv", "reading_in", "reading_post"]


def reading_post(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    out = ["## Reading", ""]
    for d in s.datasets:
        mine = select(rows, dataset=d, method="dp_postprocessing")
        base = select(rows, dataset=d, method="base_model")
        gaps = gap_by_eps(mine, s.gammas, s.epsilons)
        start = close_from(gaps)
        g0 = min(s.gammas)
        exact0 = select(mine, gamma=g0, epsilon=math.inf)
        smallest = min(e for e in s.epsilons if not math.isinf(e))
        low = select(mine, gamma=g0, epsilon=smallest)
        sentence = (
            f"**{d}.** The base model's held-out error is {fmt(*pct(base, 'error')[:2])}% at a "
            f"violation of {fmt(*pct(base, 'violation')[:2])}%; the non-private post-processing "
            f"at gamma = {g0:g} brings the violation to {fmt(*pct(exact0, 'violation')[:2])}% at "
            f"an error of {fmt(*pct(exact0, 'error')[:2])}%. The private service's mean error and "
            f"violation stay within {CLOSE:g} point of the non-private ones at every gamma "
            f"{from_text(start, list(s.epsilons))}"
        )
        if start is None or start != smallest:
            sentence += (
                f"; at eps = {eps_label(smallest)} and gamma = {g0:g} the violation is "
                f"{fmt(*pct(low, 'violation')[:2])}% and the error {fmt(*pct(low, 'error')[:2])}%"
                f" (largest distance over gamma: {gaps[smallest][0]:.1f} points)"
            )
        m = mine[0]["m"] if mine else 0
        out += [
            sentence + f". The audit split has m = {m} people, so the table's noise scale "
            f"per cell is 2/(m eps) = {2.0 / (m * smallest):.2g} at eps = {eps_label(smallest)}.",
            "",
        ]
    return out


def _first_close_per_gamma(rows: Rows, s: Settings, tol: float) -> dict[float, float | None]:
    cells = group(rows, "gamma", "epsilon")
    out: dict[float, float | None] = {}
    for g in s.gammas:
        gaps = {
            e: distance(cells.get((g, e), []), cells.get((g, math.inf), []), tol)
            for e in s.epsilons
            if not math.isinf(e)
        }
        out[g] = close_from(gaps)
    return out


def _shift_match(
    lo_rows: Rows, hi_rows: Rows, factor: int, s: Settings, tol: float
) -> tuple[float, float, int]:
    """Mean |error difference| (points) between the upsampled learner at eps and the original
    at ``factor`` eps, and between the two at the same eps, over the finite grid points where
    both exist; and how many points that is."""
    lo, hi = group(lo_rows, "gamma", "epsilon"), group(hi_rows, "gamma", "epsilon")
    shifted, same = [], []
    for g in s.gammas:
        for e in s.epsilons:
            if math.isinf(e) or factor * e not in s.epsilons:
                continue
            up = mean_of(hi.get((g, e), []), "error")
            at_more = mean_of(lo.get((g, factor * e), []), "error")
            at_same = mean_of(lo.get((g, e), []), "error")
            if up is None or at_more is None or at_same is None:
                continue
            if abs(up - at_same) > tol:  # only where upsampling changed something
                shifted.append(abs(up - at_more))
                same.append(abs(up - at_same))
    if not shifted:
        return math.nan, math.nan, 0
    return sum(shifted) / len(shifted), sum(same) / len(same), len(shifted)


def reading_in(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    tol = 2 * CLOSE
    out = ["## Reading", ""]
    for d in s.datasets:
        base = select(rows, dataset=d, method="base_model")
        exact = select(
            rows, dataset=d, method="dp_oracle_learner", upsample=min(s.upsample), epsilon=math.inf
        )
        by_gamma = [mean_of(select(exact, gamma=g), "error") for g in s.gammas]
        spread = [v for v in by_gamma if v is not None]
        smallest = min(e for e in s.epsilons if not math.isinf(e))
        noisy = select(rows, dataset=d, method="dp_oracle_learner", epsilon=smallest)
        const = stat(100.0 * r["constant_error"] for r in base)
        noisy_error = mean_of(noisy, "error")
        than = "worse" if (noisy_error or 0.0) > (const[0] or 0.0) else "no better"
        parts = [
            f"**{d}.** Without noise the oracle learner's mixture has a held-out error of "
            f"{fmt(*pct(exact, 'error')[:2])}% and a violation of "
            f"{fmt(*pct(exact, 'violation')[:2])}% (all gammas together; the mean error ranges "
            f"only from {min(spread):.1f}% to {max(spread):.1f}% over gamma), against the base "
            f"model's {fmt(*pct(base, 'error')[:2])}% and {fmt(*pct(base, 'violation')[:2])}%. "
            f"At eps = {eps_label(smallest)} its error is {fmt(*pct(noisy, 'error')[:2])}%, "
            f"{than} than always answering the majority label ({fmt(*const[:2])}%): the noise "
            "swamps the learner."
        ]
        firsts = {
            u: _first_close_per_gamma(
                select(rows, dataset=d, method="dp_oracle_learner", upsample=u), s, tol
            )
            for u in sorted(s.upsample)
        }
        names = " / ".join("original" if u == 1 else f"x{u}" for u in firsts)
        listed = "; ".join(
            f"gamma {g:g}: "
            + " / ".join("never" if f[g] is None else eps_label(f[g]) for f in firsts.values())
            for g in s.gammas
        )
        parts.append(
            f"The first eps from which the mean error and violation stay within {tol:g} points "
            f"(or two standard errors) of the non-private game, {names}: {listed}."
        )
        if len(s.upsample) > 1:
            lo_u, hi_u = min(s.upsample), max(s.upsample)
            shifted, same, count = _shift_match(
                select(rows, dataset=d, method="dp_oracle_learner", upsample=lo_u),
                select(rows, dataset=d, method="dp_oracle_learner", upsample=hi_u),
                hi_u // lo_u,
                s,
                tol,
            )
            k = hi_u // lo_u
            if count:
                parts.append(
                    f"At the {count} (gamma, eps) points where upsampling x{k} moves the mean "
                    f"error by more than {tol:g} points ({same:.1f} points on average), the "
                    f"upsampled learner's error at eps is on average {shifted:.1f} points from "
                    f"the original's at {k} times that eps: {k} times the people buy what {k} "
                    "times the eps buys."
                    if shifted <= tol
                    else f"At the {count} (gamma, eps) points where upsampling x{k} moves the "
                    f"mean error by more than {tol:g} points ({same:.1f} points on average), "
                    f"the upsampled learner's error at eps is still {shifted:.1f} points from "
                    f"the original's at {k} times that eps."
                )
        out += [" ".join(parts), ""]
    return out


def reading_conv(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    out = ["## Reading", ""]
    services = [("dp_postprocessing", 1, "threshold_optimizer", "DP post-processing")] + [
        (
            "dp_oracle_learner",
            u,
            "exponentiated_gradient",
            "the DP oracle learner" + ("" if u == 1 else f" (upsampled x{u})"),
        )
        for u in sorted(s.upsample)
    ]
    for d in s.datasets:
        parts = [f"**{d}.**"]
        for method, u, ref, label in services:
            mine = select(rows, dataset=d, method=method, upsample=u)
            if not mine:
                continue
            by_eps = group(mine, "epsilon")
            exact = by_eps.get((math.inf,), [])
            refs = select(rows, dataset=d, method=ref)
            tol = CLOSE if method == "dp_postprocessing" else 2 * CLOSE
            finite = [e for (e,) in by_eps if not math.isinf(e)]
            own = {e: distance(by_eps[(e,)], exact, tol) for e in finite}
            points = f"{tol:g} point{'s' if tol != 1 else ''}"
            text = (
                f"{label[0].upper() + label[1:]} comes within {points} of its own eps = inf "
                f"error and violation {from_text(close_from(own), list(s.epsilons))}"
            )
            if refs:
                near = {e: distance(by_eps[(e,)], refs, tol) for e in [*finite, math.inf]}
                start = close_from(near)
                name = f"fairlearn's {REFERENCES[ref]}"
                if start is None:
                    reached = f"but does not come as close to {name}"
                elif math.isinf(start):
                    reached = f"and as close to {name} only without noise"
                else:
                    reached = f"and as close to {name} {from_text(start, list(s.epsilons))}"
                de = (mean_of(exact, "error") or 0.0) - (mean_of(refs, "error") or 0.0)
                dv = (mean_of(exact, "violation") or 0.0) - (mean_of(refs, "violation") or 0.0)
                text += (
                    f", {reached} (at eps = inf its error is "
                    f"{abs(de):.1f} points {'above' if de >= 0 else 'below'} the reference's and "
                    f"its violation {abs(dv):.1f} points {'above' if dv >= 0 else 'below'})"
                )
            parts.append(text + ".")
        out += [" ".join(parts), ""]
    return out


# -------------------------------------------------------------------------------------------
# Figures
# -------------------------------------------------------------------------------------------
