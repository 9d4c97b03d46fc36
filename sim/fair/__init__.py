"""The experiments of "Differentially Private Fair Learning" (Jagielski et al. 2019), run here.

The compliance team can offer two private fair-learning services (:mod:`biasleak.mechanisms.fair`):
DP post-processing of a developer's base model (the seed's section 3) and the DP oracle learner
(section 4). Both promise an equalized-odds classifier that is differentially private in the
protected attribute A, and both pay for the privacy in accuracy and fairness. The paper measures
that price as Pareto frontiers of held-out error against realised equalized-odds violation, one
frontier per privacy level, on Communities and Crime. That data set is not bundled with biasleak,
so the experiments here run on the two that are: UCI Adult (protected attribute sex) and German
credit (sex, from its personal-status attribute).

Three experiments, each a list of plain rows (dicts) that :mod:`biasleak.sim.report.fair` turns
into a report (``biasleak paper NAME``):

``fair-postprocessing``
    For every fairness slack gamma and privacy level eps: a logistic regression trained without A
    on a training split gives 0/1 base predictions; the DP post-processing service releases the
    audit split's (prediction, group, label) table with Laplace noise of scale ``2/(m eps)`` and
    solves Hardt et al.'s linear program; the derived classifier is scored on held-out people.
``fair-inprocessing``
    The DP oracle learner over a gamma grid with ``B = 1/gamma``, on the audit split and on the
    audit split upsampled ten times (every row repeated). Repeating rows keeps the empirical
    distribution, so the non-private game is the same, while every (group, label) cell grows
    tenfold and with it the public cell-size bound the noise is calibrated to: the same eps buys
    ten times less noise. This is the seed's point about data set size.
``fair-convergence``
    Each service at one gamma as eps grows along a log grid up to ``inf``, beside fairlearn's
    non-private references on the same splits: ``ThresholdOptimizer`` for post-processing (given
    the same 0/1 base predictions, and given the base model's scores) and
    ``ExponentiatedGradient(LogisticRegression, EqualizedOdds)`` for in-processing. fairlearn is
    the optional extra ``fair``; without it the references are skipped and the report says so.

Every score is the expected error and violation of the randomized classifier on held-out people
(:func:`biasleak.mechanisms.fair.score` on probabilities), so the classifiers' own coin flips do
not add noise to the comparison. The violation is ``max(FPR gap, TPR gap)``.

Randomness: one root seed; each seed's data split and each run's noise come from their own
:class:`numpy.random.SeedSequence` child, keyed by a stable name (``split:adult``, the service,
gamma, eps, the upsampling factor), so adding a grid point changes no other run's draws, and the
rows do not depend on the number of workers.

Modules, one concept each:

- :mod:`~biasleak.sim.fair.settings`: the data sets, an experiment's grid
  (:class:`~biasleak.sim.fair.settings.Settings`), the full and the quick grids, and whether
  fairlearn is there;
- :mod:`~biasleak.sim.fair.data`: each seed's splits, encoded, with the base model's decisions;
- :mod:`~biasleak.sim.fair.runs`: one run of each service, and fairlearn's references, scored
  on held-out people;
- :mod:`~biasleak.sim.fair.experiment`: an experiment's jobs, run on the executors the sweeps
  use (:mod:`biasleak.sim.executors`), and its rows.
"""
