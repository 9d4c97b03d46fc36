"""The fair-learning reports' settings and tables: held-out error and equalized-odds violation,
mean ± sd over seeds, in percent."""

from __future__ import annotations

from biasleak.sim.fair.experiment import Outcome, select
from biasleak.sim.fair.settings import CELL_MARGIN, DATASETS
from biasleak.sim.report.fair.common import group, pct, reference_lines, runs_note, wide
from biasleak.sim.report.stats import eps_label, fmt, stat

__all__ = ["settings_lines", "tables"]


def settings_lines(outcome: Outcome) -> list[str]:
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


def tables(outcome: Outcome) -> list[str]:
    s, rows = outcome.settings, outcome.rows
    lines: list[str] = ["## Tables", ""]
    for d in s.datasets:
        base = select(rows, dataset=d, method="base_model")
        if s.name == "fair-postprocessing":
            mine = select(rows, dataset=d, method="dp_postprocessing")
            lines += [
                f"### {d}",
                "",
                runs_note(
                    [r for r in rows if r["dataset"] == d and r["method"] == "dp_postprocessing"]
                ),
                "",
            ]
            lines += wide("Held-out error (%)", mine, s.gammas, s.epsilons, "error")
            lines += wide("Held-out violation (%)", mine, s.gammas, s.epsilons, "violation")
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
                lines += [f"**{which}** (m = {m}). {runs_note(all_u)}", ""]
                lines += wide("Held-out error (%)", mine, s.gammas, s.epsilons, "error")
                lines += wide("Held-out violation (%)", mine, s.gammas, s.epsilons, "violation")
                scale = group(mine, "gamma", "epsilon")
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
            pp = group(select(rows, dataset=d, method="dp_postprocessing"), "epsilon")
            ora = {
                u: group(select(rows, dataset=d, method="dp_oracle_learner", upsample=u), "epsilon")
                for u in s.upsample
            }
            for e in s.epsilons:
                cells = [pp.get((e,), [])] + [ora[u].get((e,), []) for u in sorted(s.upsample)]
                lines.append(
                    f"| {eps_label(e)} | "
                    + " | ".join(
                        f"{fmt(*pct(c, 'error')[:2])} | {fmt(*pct(c, 'violation')[:2])}"
                        for c in cells
                    )
                    + " |"
                )
            lines += [""]
            lines += reference_lines(rows, d)
            continue
        if base:
            lines += [
                f"Base model: error {fmt(*pct(base, 'error')[:2])}%, violation "
                f"{fmt(*pct(base, 'violation')[:2])}% ({len(base)} seeds).",
                "",
            ]
    return lines
