"""The fair-learning reports' figures (matplotlib, the ``plots`` extra): Pareto frontiers of error
against violation with one curve per eps, and convergence curves against eps with the references
as horizontal lines."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from biasleak.sim._optional import MissingExtra, skipped
from biasleak.sim.fair.experiment import Outcome, select
from biasleak.sim.fair.settings import Settings
from biasleak.sim.report import figures
from biasleak.sim.report.fair.common import REFERENCES, Rows, group, mean_of, pct
from biasleak.sim.report.stats import eps_label

__all__ = ["convergence_figure", "figure_lines", "pareto_figure"]


def _curve(rows: Rows, gammas: Iterable[float], eps: float) -> list[tuple[float, float, float]]:
    """``(gamma, mean violation, mean error)`` of each gamma with runs at ``eps``."""
    cells = group(rows, "gamma", "epsilon")
    pts = []
    for g in gammas:
        rs = cells.get((g, eps), [])
        e, v = mean_of(rs, "error"), mean_of(rs, "violation")
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
            [mean_of(base, "violation")],
            [mean_of(base, "error")],
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


def pareto_figure(outcome: Outcome, to: Path) -> list[str]:
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


def convergence_figure(outcome: Outcome, to: Path, dataset: str) -> list[str]:
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
                by_eps = group(select(rows, dataset=dataset, method=method, upsample=u), "epsilon")
                xs, ms, sds = [], [], []
                for e in s.epsilons:
                    mean, sd, _ = pct(by_eps.get((e,), []), key)
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
                value = mean_of(found, key)
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


def figure_lines(outcome: Outcome, to: Path) -> list[str]:
    try:
        if outcome.settings.name == "fair-convergence":
            lines = ["## Figures", ""]
            for d in outcome.settings.datasets:
                names = convergence_figure(outcome, to, d)
                lines += [f"![{d}: convergence]({names[0]})", ""]
            return lines
        names = pareto_figure(outcome, to)
        return ["## Figures", "", f"![Pareto frontiers]({names[0]})", ""]
    except MissingExtra as err:
        return ["## Figures", "", skipped(err), ""]
