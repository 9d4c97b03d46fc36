"""Private fair learning as compliance services (Jagielski et al. 2019).

Answering fairness metrics one query at a time serves an honest developer badly: under any
meaningful privacy budget the noisy answers cannot tell candidate models apart. What the developer
wants is not a number but a fair model. Jagielski, Kearns, Mao, Oprea, Roth, Sharifi-Malvajerdi
and Ullman ("Differentially Private Fair Learning", ICML 2019) give two ways for the party that
holds the protected attribute A to deliver one, with equalized odds (equal true- and
false-positive rates across groups) as the fairness goal and differential privacy in A as the
guarantee. In biasleak that party is the compliance team, and each way becomes a service:

1. **DP post-processing** (their section 3, after Hardt, Price and Srebro 2016;
   :mod:`~biasleak.mechanisms.fair.postprocessing`). The developer submits a base model's 0/1
   predictions on the audit set. Compliance counts the table of (base prediction, group, label),
   releases it with Laplace noise calibrated to one person's attribute change, and solves a small
   linear program for the probabilities ``P[Y' = 1 | Yhat, A]`` that make the derived classifier
   as accurate as possible subject to equalized odds. Everything returned is post-processing of
   the noisy table, so it is eps-DP in A. The catch: the derived classifier reads A at decision
   time, which is disparate treatment and may be unlawful; the result says so.
2. **The DP oracle learner** (their section 4, after Agarwal et al. 2018): a game between a
   learner and an auditor whose final mixture of classifiers does not read A at decision time,
   at the price of much more noise.

Both services are judged on held-out people by their error and equalized-odds violation
(:mod:`~biasleak.mechanisms.fair.evaluation`), beside the non-private references.

Neighbouring rule, as everywhere in :mod:`biasleak.mechanisms`: two audit sets differ in ONE
person's protected attribute; features, labels and the submitted base predictions are shared.
Like the rest of this layer, the modules are pure: arrays in, values out, randomness from a seeded
:class:`numpy.random.Generator`.
"""

from biasleak.mechanisms.fair.budget import RoundBudget, laplace_vector, per_round_epsilon
from biasleak.mechanisms.fair.evaluation import (
    FairnessScore,
    equalized_odds_violation,
    error_rate,
    group_rates,
    score,
)
from biasleak.mechanisms.fair.oracle import (
    MIXTURES,
    OracleResult,
    run_oracle_learner,
    saddle_weights,
)
from biasleak.mechanisms.fair.postprocessing import (
    PostProcessing,
    conditional_rates,
    count_table,
    derived_predictions,
    derived_probabilities,
    dp_postprocess,
    project_to_simplex,
    release_table,
    solve_equalized_odds,
)

__all__ = [
    "MIXTURES",
    "FairnessScore",
    "OracleResult",
    "PostProcessing",
    "RoundBudget",
    "conditional_rates",
    "count_table",
    "derived_predictions",
    "derived_probabilities",
    "dp_postprocess",
    "equalized_odds_violation",
    "error_rate",
    "group_rates",
    "laplace_vector",
    "per_round_epsilon",
    "project_to_simplex",
    "release_table",
    "run_oracle_learner",
    "saddle_weights",
    "score",
    "solve_equalized_odds",
]
