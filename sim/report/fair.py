"""Reports of the private fair-learning experiments (Jagielski et al. 2019): Adult, German credit.

:func:`write_fair_report` turns an experiment's rows (:mod:`biasleak.sim.fair_experiments`) into
a folder: ``report.md`` with the command that made it, the data and every setting, tables of
held-out error and equalized-odds violation (mean ± sd over seeds, in percent), figures as PNG
and SVG (with the ``plots`` extra; without it the report says what it skipped) and ``rows.csv``
with every run. The report ends with a reading of the numbers, computed from them: how far each
private service is from its non-private self at each eps, from which eps on it stays close, and,
for the convergence experiment, how close it comes to fairlearn's non-private references.

The figures are the seed's: Pareto frontiers of error against violation with one curve per eps
(the points of a curve are the gamma grid), and convergence curves of error and violation
against eps with the references as horizontal lines.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.fair_experiments import CELL_MARGIN, DATASETS, Outcome, Settings, select
from biasleak.sim.paper_items import FAIR_EXPERIMENTS
from biasleak.sim.report import figures
from biasleak.sim.report.stats import eps_label, fmt, stat

__all__ = ["CLOSE", "write_fair_report"]


CLOSE: Final = 1.0
"""Points (percent) within which a private curve counts as close to a non-private one."""

REFERENCES: Final[dict[str, str]] = {
    "threshold_optimizer": "ThresholdOptimizer, 0/1 base predictions",
    "threshold_optimizer_scores": "ThresholdOptimizer, base model scores",
    "exponentiated_gradient": "ExponentiatedGradient(LogisticRegression)",
    "base_model": "base model (no fairness constraint)",
}
"""Labels of the non-private rows."""

Rows = list[dict[str, Any]]
Cell = tuple[float | None, float | None, int]


def _pct(rows: Rows, key: str) -> Cell:
    return stat(100.0 * r[key] for r in rows if r.get(key) is not None)


def _group(rows: Iterable[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], Rows]:
    out: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for r in rows:
        if r.get("status") == "ok":
            out[tuple(r.get(k) for k in keys)].append(r)
    return out


def _gamma_label(g: float | None) -> str:
    return "-" if g is None else f"{g:g}"


def _wide(
    title: str, rows: Rows, gammas: Iterable[float], epsilons: Iterable[float], key: str
) -> list[str]:
    """A table with one row per gamma and one column per eps: ``key`` in percent."""
    eps = list(epsilons)
    cells = _group(rows, "gamma", "epsilon")
    lines = [
        f"{title}",
        "",
        "| gamma | " + " | ".join(f"eps {eps_label(e)}" for e in eps) + " |",
        "|---|" + "---|" * len(eps),
    ]
    for g in gammas:
        lines.append(
            f"| {_gamma_label(g)} | "
            + " | ".join(fmt(*_pct(cells.get((g, e), []), key)[:2]) for e in eps)
            + " |"
        )
    return [*lines, ""]


def _runs_note(rows: Rows) -> str:
    ok = sum(r.get("status") == "ok" for r in rows)
    refused = sum(r.get("status") == "refused" for r in rows)
    extra = f"; {refused} refused (audit cell below the public bound)" if refused else ""
    return f"{ok} runs{extra}."


def _reference_lines(rows: Rows, dataset: str) -> list[str]:
    lines = ["| non-private | gamma | runs | error % | violation % |", "|---|---|---|---|---|"]
    for method, label in REFERENCES.items():
        found = select(rows, dataset=dataset, method=method)
        if found:
            e, v = _pct(found, "error"), _pct(found, "violation")
            lines.append(
                f"| {label} | {_gamma_label(found[0].get('gamma'))} | {e[2]} | {fmt(*e[:2])} | "
                f"{fmt(*v[:2])} |"
            )
    return [*lines, ""]


def _mean(rows: Rows, key: str) -> float | None:
    return _pct(rows, key)[0]


# -------------------------------------------------------------------------------------------
# Readings computed from the numbers
# -------------------------------------------------------------------------------------------


def _distance(here: Rows, exact: Rows, tol: float) -> tuple[float, float]:
    """(largest distance in points of the mean error or violation of ``here`` from ``exact``'s,
    that distance over what counts as close).

    Rows of the same seed share their splits, so the distance is the mean of the per-seed
    differences, and close means within ``tol`` points or two standard errors of that mean,
    whichever is larger: a curve is not called far from its limit for the seeds' spread alone.
    """
    mine = {r["seed"]: r for r in here}
    theirs = {r["seed"]: r for r in exact}
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return math.inf, math.inf
    worst, ratio = 0.0, 0.0
    for key in ("error", "violation"):
        diffs = [100.0 * (mine[k][key] - theirs[k][key]) for k in seeds]
        mean, sd, n = stat(diffs)
        se = (sd or 0.0) / math.sqrt(n)
        gap = abs(mean or 0.0)
        worst = max(worst, gap)
        ratio = max(ratio, gap / max(tol, 2.0 * se))
    return worst, ratio


def _gap_by_eps(
    rows: Rows, gammas: Iterable[float], epsilons: Iterable[float], tol: float = CLOSE
) -> dict[float, tuple[float, float]]:
    """Per finite eps: :func:`_distance` from the same gamma's eps = inf rows, the largest over
    gamma."""
    cells = _group(rows, "gamma", "epsilon")
    gaps: dict[float, tuple[float, float]] = {}
    for e in epsilons:
        if math.isinf(e):
            continue
        found = [
            _distance(cells.get((g, e), []), cells.get((g, math.inf), []), tol) for g in gammas
        ]
        gaps[e] = (max(f[0] for f in found), max(f[1] for f in found))
    return gaps


def _close_from(gaps: dict[float, tuple[float, float]]) -> float | None:
    """The smallest eps of the grid from which on every larger eps is close (ratio <= 1)."""
    found = None
    for e in sorted(gaps, reverse=True):
        if gaps[e][1] <= 1.0:
            found = e
        else:
            break
    return found


def _from_text(e: float | None, grid: list[float]) -> str:
    finite = [x for x in grid if not math.isinf(x)]
    if e is None:
        return f"at no eps of the grid (the largest is {eps_label(max(finite))})"
    if e == min(finite):
        return f"already at the smallest eps of the grid, {eps_label(e)}"
    return f"from eps = {eps_label(e)} on"


def _reading_post(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    out = ["## Reading", ""]
    for d in s.datasets:
        mine = select(rows, dataset=d, method="dp_postprocessing")
        base = select(rows, dataset=d, method="base_model")
        gaps = _gap_by_eps(mine, s.gammas, s.epsilons)
        start = _close_from(gaps)
        g0 = min(s.gammas)
        exact0 = select(mine, gamma=g0, epsilon=math.inf)
        smallest = min(e for e in s.epsilons if not math.isinf(e))
        low = select(mine, gamma=g0, epsilon=smallest)
        sentence = (
            f"**{d}.** The base model's held-out error is {fmt(*_pct(base, 'error')[:2])}% at a "
            f"violation of {fmt(*_pct(base, 'violation')[:2])}%; the non-private post-processing "
            f"at gamma = {g0:g} brings the violation to {fmt(*_pct(exact0, 'violation')[:2])}% at "
            f"an error of {fmt(*_pct(exact0, 'error')[:2])}%. The private service's mean error and "
            f"violation stay within {CLOSE:g} point of the non-private ones at every gamma "
            f"{_from_text(start, list(s.epsilons))}"
        )
        if start is None or start != smallest:
            sentence += (
                f"; at eps = {eps_label(smallest)} and gamma = {g0:g} the violation is "
                f"{fmt(*_pct(low, 'violation')[:2])}% and the error {fmt(*_pct(low, 'error')[:2])}%"
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
    cells = _group(rows, "gamma", "epsilon")
    out: dict[float, float | None] = {}
    for g in s.gammas:
        gaps = {
            e: _distance(cells.get((g, e), []), cells.get((g, math.inf), []), tol)
            for e in s.epsilons
            if not math.isinf(e)
        }
        out[g] = _close_from(gaps)
    return out


def _shift_match(
    lo_rows: Rows, hi_rows: Rows, factor: int, s: Settings, tol: float
) -> tuple[float, float, int]:
    """Mean |error difference| (points) between the upsampled learner at eps and the original
    at ``factor`` eps, and between the two at the same eps, over the finite grid points where
    both exist; and how many points that is."""
    lo, hi = _group(lo_rows, "gamma", "epsilon"), _group(hi_rows, "gamma", "epsilon")
    shifted, same = [], []
    for g in s.gammas:
        for e in s.epsilons:
            if math.isinf(e) or factor * e not in s.epsilons:
                continue
            up = _mean(hi.get((g, e), []), "error")
            at_more = _mean(lo.get((g, factor * e), []), "error")
            at_same = _mean(lo.get((g, e), []), "error")
            if up is None or at_more is None or at_same is None:
                continue
            if abs(up - at_same) > tol:  # only where upsampling changed something
                shifted.append(abs(up - at_more))
                same.append(abs(up - at_same))
    if not shifted:
        return math.nan, math.nan, 0
    return sum(shifted) / len(shifted), sum(same) / len(same), len(shifted)


def _reading_in(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    tol = 2 * CLOSE
    out = ["## Reading", ""]
    for d in s.datasets:
        base = select(rows, dataset=d, method="base_model")
        exact = select(
            rows, dataset=d, method="dp_oracle_learner", upsample=min(s.upsample), epsilon=math.inf
        )
        by_gamma = [_mean(select(exact, gamma=g), "error") for g in s.gammas]
        spread = [v for v in by_gamma if v is not None]
        smallest = min(e for e in s.epsilons if not math.isinf(e))
        noisy = select(rows, dataset=d, method="dp_oracle_learner", epsilon=smallest)
        const = stat(100.0 * r["constant_error"] for r in base)
        noisy_error = _mean(noisy, "error")
        than = "worse" if (noisy_error or 0.0) > (const[0] or 0.0) else "no better"
        parts = [
            f"**{d}.** Without noise the oracle learner's mixture has a held-out error of "
            f"{fmt(*_pct(exact, 'error')[:2])}% and a violation of "
            f"{fmt(*_pct(exact, 'violation')[:2])}% (all gammas together; the mean error ranges "
            f"only from {min(spread):.1f}% to {max(spread):.1f}% over gamma), against the base "
            f"model's {fmt(*_pct(base, 'error')[:2])}% and {fmt(*_pct(base, 'violation')[:2])}%. "
            f"At eps = {eps_label(smallest)} its error is {fmt(*_pct(noisy, 'error')[:2])}%, "
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


def _reading_conv(outcome: Outcome) -> list[str]:
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
            by_eps = _group(mine, "epsilon")
            exact = by_eps.get((math.inf,), [])
            refs = select(rows, dataset=d, method=ref)
            tol = CLOSE if method == "dp_postprocessing" else 2 * CLOSE
            finite = [e for (e,) in by_eps if not math.isinf(e)]
            own = {e: _distance(by_eps[(e,)], exact, tol) for e in finite}
            points = f"{tol:g} point{'s' if tol != 1 else ''}"
            text = (
                f"{label[0].upper() + label[1:]} comes within {points} of its own eps = inf "
                f"error and violation {_from_text(_close_from(own), list(s.epsilons))}"
            )
            if refs:
                near = {e: _distance(by_eps[(e,)], refs, tol) for e in [*finite, math.inf]}
                start = _close_from(near)
                name = f"fairlearn's {REFERENCES[ref]}"
                if start is None:
                    reached = f"but does not come as close to {name}"
                elif math.isinf(start):
                    reached = f"and as close to {name} only without noise"
                else:
                    reached = f"and as close to {name} {_from_text(start, list(s.epsilons))}"
                de = (_mean(exact, "error") or 0.0) - (_mean(refs, "error") or 0.0)
                dv = (_mean(exact, "violation") or 0.0) - (_mean(refs, "violation") or 0.0)
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


def _curve(rows: Rows, gammas: Iterable[float], eps: float) -> list[tuple[float, float, float]]:
    """``(gamma, mean violation, mean error)`` of each gamma with runs at ``eps``."""
    cells = _group(rows, "gamma", "epsilon")
    pts = []
    for g in gammas:
        rs = cells.get((g, eps), [])
        e, v = _mean(rs, "error"), _mean(rs, "violation")
        if e is not None and v is not None:
            pts.append((g, v, e))
    return pts


def _pareto_panel(ax: Any, rows: Rows, base: Rows, s: Settings, title: str) -> None:
    cmap = figures.pyplot().get_cmap("viridis")
    finite = [e for e in s.epsilons if not math.isinf(e)]
    for i, eps in enumerate(s.epsilons):
        pts = _curve(rows, s.gammas, eps)
        if not pts:
            continue
        colour = "black" if math.isinf(eps) else cmap(i / max(len(finite), 1))
        ax.plot(
            [p[1] for p in pts],
            [p[2] for p in pts],
            marker="o",
            markersize=3,
            color=colour,
            label=f"eps = {eps_label(eps)}",
        )
        if math.isinf(eps):  # name the gamma of each point once, on the non-private curve
            for g, x, y in pts:
                ax.annotate(f"{g:g}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    if base:
        ax.scatter(
            [_mean(base, "violation")],
            [_mean(base, "error")],
            marker="*",
            s=120,
            color="tab:red",
            zorder=5,
            label="base model",
        )
    ax.set_xlabel("held-out equalized-odds violation (%)")
    ax.set_ylabel("held-out error (%)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def _pareto_figure(outcome: Outcome, to: Path) -> list[str]:
    plt = figures.pyplot()
    s, rows = outcome.settings, outcome.rows
    method = "dp_postprocessing" if s.name == "fair-postprocessing" else "dp_oracle_learner"
    ups = [1] if method == "dp_postprocessing" else sorted(s.upsample)
    fig, axes = plt.subplots(
        len(ups), len(s.datasets), figsize=(5.5 * len(s.datasets), 4.2 * len(ups)), squeeze=False
    )
    for i, u in enumerate(ups):
        for j, d in enumerate(s.datasets):
            mine = select(rows, dataset=d, method=method, upsample=u)
            base = select(rows, dataset=d, method="base_model")
            m = mine[0]["m"] if mine else 0
            title = f"{d} (audit m = {m}" + ("" if u == 1 else f", upsampled x{u}") + ")"
            _pareto_panel(axes[i][j], mine, base, s, title)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle(
        "Pareto frontiers (points: gamma = " + ", ".join(f"{g:g}" for g in s.gammas) + ")",
        fontsize=10,
    )
    fig.tight_layout()
    names = figures.save(fig, to, "pareto")
    plt.close(fig)
    return names


def _tick(eps: float) -> str:
    """A tick label: ``0.1``, ``1``, ``100``, then powers of ten as ``1e4``."""
    return f"1e{round(math.log10(eps))}" if eps >= 1e4 else eps_label(eps)


def _x_of(eps: float, top: float) -> float:
    """Where eps sits on the convergence figures' log axis: inf one decade beyond the grid."""
    return top * 10.0 if math.isinf(eps) else eps


def _convergence_figure(outcome: Outcome, to: Path, dataset: str) -> list[str]:
    plt = figures.pyplot()
    s, rows = outcome.settings, outcome.rows
    finite = [e for e in s.epsilons if not math.isinf(e)]
    top = max(finite)
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True, squeeze=False)
    panels = [
        (
            "dp_postprocessing",
            [1],
            ["threshold_optimizer", "threshold_optimizer_scores"],
            "DP post-processing (gamma = 0)",
        ),
        (
            "dp_oracle_learner",
            sorted(s.upsample),
            ["exponentiated_gradient"],
            f"DP oracle learner (gamma = {s.convergence_gamma:g}, B = {1 / s.convergence_gamma:g})",
        ),
    ]
    styles = ["--", ":"]
    for col, (method, ups, refs, title) in enumerate(panels):
        for row, key in enumerate(("error", "violation")):
            ax = axes[row][col]
            for u in ups:
                by_eps = _group(select(rows, dataset=dataset, method=method, upsample=u), "epsilon")
                xs, ms, sds = [], [], []
                for e in s.epsilons:
                    mean, sd, _ = _pct(by_eps.get((e,), []), key)
                    if mean is not None:
                        xs.append(_x_of(e, top))
                        ms.append(mean)
                        sds.append(sd or 0.0)
                label = "private service" + ("" if u == 1 else f", upsampled x{u}")
                (line,) = ax.plot(xs, ms, marker="o", markersize=3, label=label)
                ax.fill_between(
                    xs,
                    [m - d for m, d in zip(ms, sds, strict=True)],
                    [m + d for m, d in zip(ms, sds, strict=True)],
                    color=line.get_color(),
                    alpha=0.15,
                )
            for k, ref in enumerate([*refs, "base_model"]):
                found = select(rows, dataset=dataset, method=ref)
                value = _mean(found, key)
                if value is not None:
                    ax.axhline(
                        value,
                        linestyle=styles[k % 2] if ref != "base_model" else "-.",
                        color="tab:red" if ref == "base_model" else "black",
                        linewidth=1,
                        label=REFERENCES[ref],
                    )
            ax.set_xscale("log")
            ax.set_ylabel(f"held-out {key} (%)" if key == "error" else "held-out violation (%)")
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(title, fontsize=9)
            if row == 1:
                ticks = [e for e in finite if math.log10(e).is_integer()] + [top * 10.0]
                ax.set_xticks(ticks)
                ax.set_xticklabels([_tick(t) for t in ticks[:-1]] + ["inf"], fontsize=7)
                ax.set_xlabel("epsilon (total)")
            if row == 0:
                ax.legend(fontsize=6, loc="best")
    fig.suptitle(
        f"{dataset}: error and violation as epsilon grows (band: ± sd over seeds)", fontsize=10
    )
    fig.tight_layout()
    names = figures.save(fig, to, f"convergence_{dataset}")
    plt.close(fig)
    return names


# -------------------------------------------------------------------------------------------
# Tables and the report
# -------------------------------------------------------------------------------------------


def _settings_lines(outcome: Outcome) -> list[str]:
    s = outcome.settings
    eps = ", ".join(eps_label(e) for e in s.epsilons)
    n_train, n_audit, n_held = s.german_split
    lines = [
        "## Data and settings",
        "",
        "The seed paper runs on Communities and Crime, which biasleak does not bundle; these "
        "experiments use the two data sets it does bundle:",
        "",
    ]
    for d in s.datasets:
        lines.append(f"- **{d}**: {DATASETS[d]}.")
    lines += [
        "",
        f"- Splits, drawn per seed: Adult trains the base model on its training split (32,561 "
        f"people), takes an audit split of {s.adult_audit} people from the test split and holds "
        f"out the rest of the test split; German credit (1,000 people) is split at random into "
        f"{n_train} training, {n_audit} audit and {n_held} held-out people.",
        "- Base model: logistic regression on one-hot and standardised features, without A; its "
        "0/1 decisions (threshold 0.5) are what post-processing sees. The oracle learner's "
        "features are the same encoding.",
        "- Scores: expected error and equalized-odds violation max(FPR gap, TPR gap) of the "
        "randomized classifier on the held-out people, in percent; mean ± sd over "
        f"{s.seeds} seed{'s' if s.seeds != 1 else ''} (each seed draws its own split and noise).",
        f"- Privacy levels eps: {eps}. Neighbouring data sets differ in one person's protected "
        "attribute.",
    ]
    if s.name in ("fair-postprocessing", "fair-convergence"):
        gam = ", ".join(f"{g:g}" for g in s.gammas) if s.name == "fair-postprocessing" else "0"
        lines.append(
            f"- DP post-processing: gamma in {{{gam}}}; the (prediction, group, label) count "
            "table gets discrete Laplace noise of scale 2/eps per count (2/(m eps) per cell of "
            "the normalised table), is projected onto the simplex and fed to Hardt et al.'s "
            "linear program."
        )
    if s.name in ("fair-inprocessing", "fair-convergence"):
        gam = (
            ", ".join(f"{g:g}" for g in s.gammas)
            if s.name == "fair-inprocessing"
            else f"{s.convergence_gamma:g}"
        )
        ups = ", ".join(f"x{u}" for u in s.upsample)
        lines.append(
            f"- DP oracle learner: gamma in {{{gam}}} with B = 1/gamma, T = {s.rounds} rounds "
            f"(2T Laplace mechanisms), least-squares learner, learning rate 2/B, the rounds' "
            "classifiers mixed with the weights of the game's linear program on the released "
            "violations (`mixture: saddle`, post-processing; the seed averaged them uniformly, "
            f"which oscillating multipliers make 10 points worse on Adult), total delta = "
            f"{s.delta:g}, per-mechanism eps from the `{s.accountant}` accountant. The noise is "
            f"calibrated to a public bound on every (group, label) cell: {CELL_MARGIN:g} times the "
            "training split's smallest cell share (other people than the audit split) times m. "
            f"Audit split as is and upsampled ({ups}: every row repeated; the bound grows with "
            "m, the non-private game does not change). The guarantee is per row: upsampling "
            "stands for a population ten times as large, as in the seed; a person whose row is "
            "copied ten times would be protected only at ten times eps."
        )
    if s.name == "fair-convergence":
        lines.append(
            "- References (non-private, fairlearn, fitted on the same audit split and scored on "
            "the same held-out people): ThresholdOptimizer(constraints='equalized_odds') given "
            "the same 0/1 base predictions as the service, and given the base model's scores; "
            f"ExponentiatedGradient(LogisticRegression, EqualizedOdds(difference_bound = "
            f"{s.convergence_gamma:g}))."
        )
    return [*lines, ""]


def _tables(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    lines: list[str] = ["## Tables", ""]
    for d in s.datasets:
        base = select(rows, dataset=d, method="base_model")
        if s.name == "fair-postprocessing":
            mine = select(rows, dataset=d, method="dp_postprocessing")
            lines += [
                f"### {d}",
                "",
                _runs_note(
                    [r for r in rows if r["dataset"] == d and r["method"] == "dp_postprocessing"]
                ),
                "",
            ]
            lines += _wide("Held-out error (%)", mine, s.gammas, s.epsilons, "error")
            lines += _wide("Held-out violation (%)", mine, s.gammas, s.epsilons, "violation")
        elif s.name == "fair-inprocessing":
            lines += [f"### {d}", ""]
            for u in sorted(s.upsample):
                all_u = [
                    r
                    for r in rows
                    if r["dataset"] == d
                    and r["method"] == "dp_oracle_learner"
                    and r.get("upsample") == u
                ]
                mine = select(rows, dataset=d, method="dp_oracle_learner", upsample=u)
                m = mine[0]["m"] if mine else 0
                which = "original" if u == 1 else f"upsampled x{u}"
                lines += [f"**{which}** (m = {m}). {_runs_note(all_u)}", ""]
                lines += _wide("Held-out error (%)", mine, s.gammas, s.epsilons, "error")
                lines += _wide("Held-out violation (%)", mine, s.gammas, s.epsilons, "violation")
                scale = _group(mine, "gamma", "epsilon")
                g = s.gammas[len(s.gammas) // 2]
                lines += [
                    f"Laplace scale on X^T c (learner) and on the violations (auditor), "
                    f"gamma = {g:g}, mean over seeds:",
                    "",
                    "| | " + " | ".join(f"eps {eps_label(e)}" for e in s.epsilons) + " |",
                    "|---|" + "---|" * len(s.epsilons),
                ]
                for key in ("learner_scale", "auditor_scale"):
                    vals = [stat(r[key] for r in scale.get((g, e), []))[0] for e in s.epsilons]
                    lines.append(
                        f"| {key.split('_')[0]} | "
                        + " | ".join("-" if v is None else f"{v:.3g}" for v in vals)
                        + " |"
                    )
                lines.append("")
        else:
            lines += [
                f"### {d}",
                "",
                "| eps | post-processing error % | violation % | "
                + " | ".join(f"oracle x{u} error % | violation %" for u in sorted(s.upsample))
                + " |",
                "|---|---|---|" + "---|---|" * len(s.upsample),
            ]
            pp = _group(select(rows, dataset=d, method="dp_postprocessing"), "epsilon")
            ora = {
                u: _group(
                    select(rows, dataset=d, method="dp_oracle_learner", upsample=u), "epsilon"
                )
                for u in s.upsample
            }
            for e in s.epsilons:
                cells = [pp.get((e,), [])] + [ora[u].get((e,), []) for u in sorted(s.upsample)]
                lines.append(
                    f"| {eps_label(e)} | "
                    + " | ".join(
                        f"{fmt(*_pct(c, 'error')[:2])} | {fmt(*_pct(c, 'violation')[:2])}"
                        for c in cells
                    )
                    + " |"
                )
            lines += [""]
            lines += _reference_lines(rows, d)
            continue
        if base:
            lines += [
                f"Base model: error {fmt(*_pct(base, 'error')[:2])}%, violation "
                f"{fmt(*_pct(base, 'violation')[:2])}% ({len(base)} seeds).",
                "",
            ]
    return lines


def _figures(outcome: Outcome, to: Path) -> list[str]:
    try:
        if outcome.settings.name == "fair-convergence":
            lines = ["## Figures", ""]
            for d in outcome.settings.datasets:
                names = _convergence_figure(outcome, to, d)
                lines += [f"![{d}: convergence]({names[0]})", ""]
            return lines
        names = _pareto_figure(outcome, to)
        return ["## Figures", "", f"![Pareto frontiers]({names[0]})", ""]
    except MissingExtra as err:
        return ["## Figures", "", skipped(err), ""]


def _write_rows(rows: Rows, path: Path) -> None:
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for r in rows:
            writer.writerow(
                {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
            )


def write_fair_report(outcome: Outcome, *, to: str | Path, command: str) -> Path:
    """Write ``report.md``, ``rows.csv`` and the figures of ``outcome`` into ``to``; return the
    report's path. ``command`` is the command line that made the rows, printed at the top."""
    folder = Path(to)
    folder.mkdir(parents=True, exist_ok=True)
    s = outcome.settings
    _write_rows(outcome.rows, folder / "rows.csv")
    lines = [
        f"# {FAIR_EXPERIMENTS[s.name]}",
        "",
        'Jagielski, Kearns, Mao, Oprea, Roth, Sharifi-Malvajerdi and Ullman, "Differentially '
        "Private Fair Learning\" (ICML 2019), reproduced with biasleak's compliance services "
        "(`biasleak.mechanisms.fair`).",
        "",
        "Made with:",
        "",
        "```bash",
        command,
        "```",
        "",
        f"{len(outcome.rows)} rows in {outcome.seconds:.0f} s with {outcome.workers} "
        f"worker{'s' if outcome.workers != 1 else ''}; every run is in `rows.csv`.",
        "",
        *(f"Note: {line}" for line in outcome.skipped),
        *([""] if outcome.skipped else []),
        *_settings_lines(outcome),
        *_tables(outcome),
        *_figures(outcome, folder),
    ]
    reading = {
        "fair-postprocessing": _reading_post,
        "fair-inprocessing": _reading_in,
        "fair-convergence": _reading_conv,
    }[s.name]
    lines += reading(outcome)
    path = folder / "report.md"
    path.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return path
