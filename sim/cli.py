"""The ``biasleak`` command line.

Subcommands available now:

``demo``
    The embedded default job: load a bundled data set, train the base model without the protected
    attribute, print the exact statistical parity gap of the base model and what the compliance
    team would answer with the Laplace mechanism and with Attribute-Conceal at a few epsilons.

The simulator's subcommands (``run``, ``compare``, ``sweep``, ``replay``, ``report``,
``validate``, ``schema``) arrive with the simulation layer; ``biasleak --help`` lists them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from importlib import metadata

import numpy as np

PLANNED = ("run", "compare", "sweep", "replay", "report", "validate", "schema")


def _version() -> str:
    try:
        return metadata.version("biasleak")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "unknown"


def _epsilons(text: str) -> list[float]:
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="biasleak",
        description=(
            "Simulate how fairness-metric queries leak protected attributes, and which answering "
            "policy stops it. Coming with the simulator: " + ", ".join(PLANNED) + "."
        ),
    )
    parser.add_argument("--version", action="version", version=f"biasleak {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser(
        "demo",
        help="exact and private SP answers for the base model on a bundled data set",
        description=(
            "Train the base model on a bundled data set without the protected attribute and "
            "print its exact statistical parity gap beside Laplace and Attribute-Conceal answers."
        ),
    )
    demo.add_argument("--dataset", choices=("adult", "german", "synthetic"), default="adult")
    demo.add_argument("--n", type=int, default=1000, help="audit set size (default 1000)")
    demo.add_argument("--seed", type=int, default=0, help="seed for the audit draw and the noise")
    demo.add_argument(
        "--epsilons",
        type=_epsilons,
        default=[0.1, 1.0, 10.0, 100.0],
        help="comma-separated epsilons (default 0.1,1,10,100)",
    )
    demo.add_argument(
        "--draws",
        type=int,
        default=2001,
        help="noise draws per row for the median error (default 2001)",
    )
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def demo(args: argparse.Namespace) -> int:
    """Run the embedded default job and print its results."""
    from biasleak.mechanisms import metrics, release
    from biasleak.agents.models import train_base_model
    from biasleak.sim.datasets import load_adult, load_german, make_synthetic

    if args.draws < 1:
        print("biasleak demo: --draws must be >= 1", file=sys.stderr)
        return 2
    try:
        if args.dataset == "adult":
            data = load_adult(protected="race", n=args.n, seed=args.seed)
        elif args.dataset == "german":
            data = load_german(n=args.n, seed=args.seed)
        else:
            data = make_synthetic(n=args.n, n0=max(1, args.n // 10), seed=args.seed)
    except ValueError as err:
        print(f"biasleak demo: {err}", file=sys.stderr)
        return 2
    model = train_base_model(data.public.train)
    h0 = model.predict_proba(data.public.audit)
    sp = float(metrics.statistical_parity(h0, protected=data.protected))
    rng = np.random.default_rng(args.seed)
    rows = []
    for eps in args.epsilons:
        for mech in ("laplace", "attribute_conceal"):
            draws = [
                release.release(
                    mech, [sp], metric="sp", n1=data.n1, n0=data.n0, epsilon=eps, rng=rng
                )
                for _ in range(args.draws)
            ]
            answers = np.array([d.values[0] for d in draws])
            rows.append(
                {
                    "epsilon": eps,
                    "mechanism": mech,
                    "answer": float(answers[0]),
                    "median_abs_error": float(np.median(np.abs(answers - sp))),
                    "noise_scale": draws[0].noise_scale,
                }
            )
    summary = {
        "dataset": data.public.description,
        "protected": data.public.protected_name,
        "n": data.n,
        "n1": data.n1,
        "n0": data.n0,
        "advantaged": data.advantaged,
        "disadvantaged": data.disadvantaged,
        "base_model_accuracy": model.accuracy(data.public.audit),
        "exact_sp": sp,
        "draws": args.draws,
        "answers": rows,
    }
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return 0
    print(f"biasleak {_version()} demo")
    print(f"data:       {summary['dataset']}")
    print(f"groups:     N1 = {data.n1} ({data.advantaged}), N0 = {data.n0} ({data.disadvantaged})")
    print(
        "base model: logistic regression trained without the protected attribute; "
        f"audit accuracy {100 * summary['base_model_accuracy']:.2f}%"
    )
    print(f"exact SP of the base model: {sp:+.5f}")
    print()
    print(
        "One SP query answered privately (m = 1). 'answer' is one draw; 'median |error|' is over "
        f"{args.draws} draws.\n'noise scale' is internal to the compliance team: for "
        "Attribute-Conceal it depends on N0 and N1."
    )
    header = f"{'epsilon':>8}  {'mechanism':<18} {'answer':>10} {'median |error|':>15} "
    header += f"{'noise scale':>12}"
    print(header)
    print("-" * len(header))
    for r in rows:
        eps = "inf" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
        print(
            f"{eps:>8}  {r['mechanism']:<18} {r['answer']:>+10.4f} "
            f"{r['median_abs_error']:>15.4f} {r['noise_scale']:>12.4f}"
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``biasleak`` console script and ``python -m biasleak.sim``."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        return demo(args)
    parser.print_help()
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
