"""The pure mathematics of biasleak: fairness queries, sensitivities, private releases, accounting.

Nothing here imports SimPy, logs or touches files: functions take arrays and explicit state and
return values; time, where it matters, comes in as an argument and randomness as a seeded
:class:`numpy.random.Generator`. A researcher can use this subpackage without the simulator::

    import numpy as np
    from biasleak.mechanisms import metrics, release, sensitivity

    sp = metrics.statistical_parity(predictions, protected=a)          # exact answer(s)
    noisy = release.attribute_conceal(sp, n1=n1, n0=n0, m=1, epsilon=1.0,
                                      rng=np.random.default_rng(0))    # eps-DP answer(s)

Modules:

- :mod:`~biasleak.mechanisms.metrics`: SP, |SP|, EO, |EO|, equalized odds, predictive parity,
  vectorised over batches of models;
- :mod:`~biasleak.mechanisms.sensitivity`: global, local and smooth sensitivities (with the
  corrections to the paper's formulas documented there);
- :mod:`~biasleak.mechanisms.release`: Laplace, Attribute-Conceal, smooth Laplace, Gaussian,
  output bounding;
- :mod:`~biasleak.mechanisms.samplers`: floating-point-safe noise (grid releases, exact discrete
  Laplace and Gaussian samplers, exactly rounded continuous noise), the default of every release;
  its parts: :mod:`~biasleak.mechanisms.grid` (the release grid),
  :mod:`~biasleak.mechanisms.discrete_noise` (exact discrete samplers),
  :mod:`~biasleak.mechanisms.rounded_noise` (continuous noise rounded exactly),
  :mod:`~biasleak.mechanisms.gaussian_sigma` (analytic and discrete Gaussian sigmas); the
  floating-point path kept for the attack is :mod:`~biasleak.mechanisms.naive_noise`, and each
  mechanism's calibration is in :mod:`~biasleak.mechanisms.calibrate`;
- :mod:`~biasleak.mechanisms.accounting`: budgets (ledgers) with basic, advanced and KOV
  composition, the theorems in :mod:`~biasleak.mechanisms.composition`;
- :mod:`~biasleak.mechanisms.ceiling`: the leakage ceiling a composed privacy loss proves;
- :mod:`~biasleak.mechanisms.policy`: answering policies, one module per stage, and ``decide``;
- :mod:`~biasleak.mechanisms.audit`: private group counts and rates for audit reports
  (add/remove-one-record adjacency);
- :mod:`~biasleak.mechanisms.digests`: the SHA-256 content digests used everywhere.
- :mod:`~biasleak.mechanisms.fair`: private fair learning (Jagielski et al. 2019): DP
  post-processing to equalized odds, and the DP oracle learner; the mathematics only, for the
  compliance services still to be built on it.

Neighbouring rule, unless a function says otherwise: two audit sets differ in ONE person's
protected attribute; features and labels are shared.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasleak.mechanisms import accounting, audit, metrics, release, samplers, sensitivity
    from biasleak.mechanisms.accounting import BudgetExceeded, Ledger, LedgerBook
    from biasleak.mechanisms.metrics import (
        METRICS,
        absolute_equal_opportunity,
        absolute_statistical_parity,
        equal_opportunity,
        equalized_odds,
        evaluate,
        predictive_parity,
        statistical_parity,
    )
    from biasleak.mechanisms.release import (
        MECHANISMS,
        SAMPLERS,
        Release,
        attribute_conceal,
        laplace,
    )
    from biasleak.mechanisms.sensitivity import global_sensitivity, smooth_sensitivity

_HOME = {
    "BudgetExceeded": "accounting",
    "Ledger": "accounting",
    "LedgerBook": "accounting",
    "METRICS": "metrics",
    "absolute_equal_opportunity": "metrics",
    "absolute_statistical_parity": "metrics",
    "equal_opportunity": "metrics",
    "equalized_odds": "metrics",
    "evaluate": "metrics",
    "predictive_parity": "metrics",
    "statistical_parity": "metrics",
    "MECHANISMS": "release",
    "SAMPLERS": "release",
    "Release": "release",
    "attribute_conceal": "release",
    "laplace": "release",
    "global_sensitivity": "sensitivity",
    "smooth_sensitivity": "sensitivity",
}
"""Where each export lives: loaded on first use (PEP 562), so that importing one module of the
package (a scenario file's validation, say) does not load every mechanism and SciPy with it."""

_MODULES = ("accounting", "audit", "metrics", "release", "samplers", "sensitivity")


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name in _HOME:
        value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


__all__ = [
    "MECHANISMS",
    "METRICS",
    "SAMPLERS",
    "BudgetExceeded",
    "Ledger",
    "LedgerBook",
    "Release",
    "absolute_equal_opportunity",
    "absolute_statistical_parity",
    "accounting",
    "attribute_conceal",
    "audit",
    "equal_opportunity",
    "equalized_odds",
    "evaluate",
    "global_sensitivity",
    "laplace",
    "metrics",
    "predictive_parity",
    "release",
    "samplers",
    "sensitivity",
    "smooth_sensitivity",
    "statistical_parity",
]
