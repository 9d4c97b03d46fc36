"""The ``biasleak demo`` command: one fairness query answered exactly and privately.

No simulation runs here. The demo draws an audit set from a bundled data set (Adult, German
credit, or a synthetic one), trains the developers' base model without the protected attribute,
computes its exact statistical parity (SP) gap on the audit set, and answers that single query the
way the compliance team would under differential privacy: with the Laplace mechanism (global
sensitivity) and with Attribute-Conceal (smooth sensitivity, Cauchy noise), at each epsilon asked
for. For every epsilon and mechanism it prints one private answer and the median absolute error
over many draws, beside the noise scale the compliance team used. That scale is internal to the
compliance side: for Attribute-Conceal it depends on the group sizes N0 and N1, so releasing it
would break the guarantee.

The command line (:mod:`biasleak.sim.cli`) parses the options and calls :func:`run_demo`;
:func:`demo_summary` is the computation and :func:`format_demo` the table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np

__all__ = ["demo_summary", "epsilons", "format_demo", "run_demo"]

MECHANISMS = ("laplace", "attribute_conceal")
"""The private answers shown for every epsilon, in this order."""


def epsilons(text: str) -> list[float]:
    """The ``--epsilons`` option: comma-separated numbers > 0 (``inf`` allowed)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            eps = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"epsilons must be comma-separated numbers > 0 (or inf); received {part!r}"
            ) from None
        if not eps > 0:
            raise argparse.ArgumentTypeError(f"every epsilon must be > 0; received {part!r}")
        out.append(eps)
    return out


def demo_summary(
    *, dataset: str, n: int, seed: int, epsilons: list[float], draws: int
) -> dict[str, Any]:
    """The demo's figures as one JSON-ready mapping.

    Raises :class:`ValueError` when the data set cannot give ``n`` people.
    """
    from biasleak.agents.models import train_base_model
    from biasleak.mechanisms import metrics, release
    from biasleak.sim.datasets import load_adult, load_german, make_synthetic

    if dataset == "adult":
        data = load_adult(protected="race", n=n, seed=seed)
    elif dataset == "german":
        data = load_german(n=n, seed=seed)
    else:
        data = make_synthetic(n=n, n0=max(1, n // 10), seed=seed)
    model = train_base_model(data.public.train)
    h0 = model.predict_proba(data.public.audit)
    sp = float(metrics.statistical_parity(h0, protected=data.protected))
    rng = np.random.default_rng(seed)
    rows = []
    for eps in epsilons:
        for mech in MECHANISMS:
            answers_drawn = [
                release.release(
                    mech, [sp], metric="sp", n1=data.n1, n0=data.n0, epsilon=eps, rng=rng
                )
                for _ in range(draws)
            ]
            answers = np.array([d.values[0] for d in answers_drawn])
            rows.append(
                {
                    "epsilon": eps,
                    "mechanism": mech,
                    "answer": float(answers[0]),
                    "median_abs_error": float(np.median(np.abs(answers - sp))),
                    "noise_scale": answers_drawn[0].noise_scale,
                }
            )
    return {
        "dataset": data.public.description,
        "protected": data.public.protected_name,
        "n": data.n,
        "n1": data.n1,
        "n0": data.n0,
        "advantaged": data.advantaged,
        "disadvantaged": data.disadvantaged,
        "base_model_accuracy": model.accuracy(data.public.audit),
        "exact_sp": sp,
        "draws": draws,
        "answers": rows,
    }


def format_demo(summary: dict[str, Any], *, version: str) -> str:
    """The demo's figures for people: the data, the base model, then one row per answer."""
    lines = [
        f"biasleak {version} demo",
        f"data:       {summary['dataset']}",
        f"groups:     N1 = {summary['n1']} ({summary['advantaged']}), "
        f"N0 = {summary['n0']} ({summary['disadvantaged']})",
        "base model: logistic regression trained without the protected attribute; "
        f"audit accuracy {100 * summary['base_model_accuracy']:.2f}%",
        f"exact SP of the base model: {summary['exact_sp']:+.5f}",
        "",
        "One SP query answered privately (m = 1). 'answer' is one draw; 'median |error|' is over "
        f"{summary['draws']} draws.\n'noise scale' is internal to the compliance team: for "
        "Attribute-Conceal it depends on N0 and N1.",
    ]
    header = f"{'epsilon':>8}  {'mechanism':<18} {'answer':>10} {'median |error|':>15} "
    header += f"{'noise scale':>12}"
    lines += [header, "-" * len(header)]
    for r in summary["answers"]:
        eps = "inf" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
        lines.append(
            f"{eps:>8}  {r['mechanism']:<18} {r['answer']:>+10.4f} "
            f"{r['median_abs_error']:>15.4f} {r['noise_scale']:>12.4f}"
        )
    return "\n".join(lines)


def run_demo(args: argparse.Namespace, *, version: str) -> int:
    """``biasleak demo``: print the summary as a table (or JSON); 2 on bad sizes."""
    if args.draws < 1:
        print("biasleak demo: --draws must be >= 1", file=sys.stderr)
        return 2
    try:
        summary = demo_summary(
            dataset=args.dataset,
            n=args.n,
            seed=args.seed,
            epsilons=args.epsilons,
            draws=args.draws,
        )
    except ValueError as err:
        print(f"biasleak demo: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(format_demo(summary, version=version))
    return 0
