"""The fair-learning experiments (``biasleak paper fair-*``): the noise they rest on, the runner and
the command.

The authors' public code passed the intended Laplace scale as numpy's MEAN argument
(``np.random.laplace(scale)``), which shifts every released statistic by the scale instead of
spreading it around the truth. The first tests take the noise out of what the services release,
exactly as the experiments call them (the post-processing table; the oracle learner's released
violations and its learner's noisy ``X^T c``, recovered from the returned classifiers), and
check that it is centred with the stated spread; the same check is shown to reject a
mean-shifted draw. The rest run the experiment runner on tiny grids (German credit, a few seeds)
and the command with ``--quick``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from numpy.typing import NDArray

from biasleak.mechanisms.fair import count_table, dp_postprocess, run_oracle_learner
from biasleak.mechanisms.fair.oracle import lagrangian_costs
from biasleak.sim.cli import main
from biasleak.sim.fair import experiment as fe
from biasleak.sim.fair import settings as fs
from biasleak.sim.paper_items import FAIR_EXPERIMENTS, PAPER_ITEMS
from biasleak.sim.report.fair import write_fair_report

Z = 5.0
"""Standard errors a sample mean may stray (a false alarm per check well below 1e-5)."""


def centred_with_scale(noise: NDArray[np.float64], scale: float) -> tuple[bool, bool]:
    """(every column's mean within Z standard errors of 0, mean |noise| within Z se of scale).

    Laplace(0, b) has sd sqrt(2) b, E|X| = b and sd |X| = b; ``noise`` is (draws, coordinates).
    """
    k = noise.shape[0]
    centred = bool(np.all(np.abs(noise.mean(axis=0)) <= Z * math.sqrt(2.0) * scale / math.sqrt(k)))
    spread = abs(float(np.mean(np.abs(noise))) - scale) <= Z * scale / math.sqrt(noise.size)
    return centred, spread


def test_the_check_rejects_the_mean_argument_bug() -> None:
    rng = np.random.default_rng(0)
    good = rng.laplace(0.0, 0.3, size=(600, 8))
    assert centred_with_scale(good, 0.3) == (True, True)
    shifted = np.random.default_rng(0).laplace(0.3, 0.3, size=(600, 8))  # loc = intended scale
    assert not centred_with_scale(shifted, 0.3)[0]
    assert not centred_with_scale(good, 0.15)[1]  # a wrong spread is caught too


# --------------------------------------------------------------------------------------------
# The noise of the post-processing table, as dp_postprocess releases it


def test_postprocessing_table_noise_is_centred_with_scale_two_over_m_eps() -> None:
    rng = np.random.default_rng(1)
    m, eps, draws = 400, 0.5, 600
    yhat, a, y = rng.integers(0, 2, m), rng.integers(0, 2, m), rng.integers(0, 2, m)
    exact = count_table(yhat, protected=a, labels=y) / m
    noise_rng = np.random.default_rng(2)
    results = [
        dp_postprocess(yhat, protected=a, labels=y, epsilon=eps, rng=noise_rng, gamma=0.05)
        for _ in range(draws)
    ]
    assert {r.noise_scale for r in results} == {2.0 / (m * eps)}
    noise = np.array([r.noisy_table - exact for r in results]).reshape(draws, -1)
    assert centred_with_scale(noise, 2.0 / (m * eps)) == (True, True)


# --------------------------------------------------------------------------------------------
# The oracle learner's two noises, recovered from what it returns


def _game_data(m: int, seed: int) -> tuple[NDArray, NDArray, NDArray]:
    rng = np.random.default_rng(seed)
    a = (rng.random(m) < 0.6).astype(np.int64)
    x = rng.normal(size=(m, 3)) + 0.8 * a[:, None]
    y = (rng.random(m) < 1.0 / (1.0 + np.exp(-x[:, 0] + 0.3))).astype(np.int64)
    return x, y, a


def test_oracle_noise_is_centred_with_the_stated_scales() -> None:
    x, y, a = _game_data(300, 3)
    m, d = x.shape
    design = np.hstack([x, np.ones((m, 1))])
    gram = design.T @ design
    gram += 1e-10 * (np.trace(gram) / (d + 1)) * np.eye(d + 1)  # as the learner regularises
    counts = np.zeros((2, 2), dtype=np.int64)
    np.add.at(counts, (a, y), 1)
    rng = np.random.default_rng(4)
    auditor, learner = [], []
    scales = set()
    for _ in range(150):
        r = run_oracle_learner(
            x, y, protected=a, epsilon=20.0, delta=1e-6, gamma=0.05, bound=5.0, rounds=4,
            rng=rng, accountant="basic", min_cell_size=20,
        )  # fmt: skip
        scales.add((r.learner_scale, r.auditor_scale))
        decisions = r.scores(x) > 0.0
        for t in range(r.rounds):
            h = decisions[t]
            rates = [[h[(a == g) & (y == lab)].mean() for lab in (0, 1)] for g in (0, 1)]
            auditor.append(r.noisy_violations[t, 0] - np.subtract(rates[1], rates[0]))
            mu = r.lambda_plus[t] - r.lambda_minus[t]
            costs = lagrangian_costs(y, codes=a, counts=counts, mu=mu)
            weights = np.append(r.coefficients[t], r.intercepts[t])
            learner.append(-gram @ weights - design.T @ costs)  # released X^T c minus exact
    (learner_scale, auditor_scale), *rest = scales
    assert not rest  # the scales are public: the same in every run
    assert learner_scale > 0.0 and auditor_scale > 0.0
    assert centred_with_scale(np.array(auditor), auditor_scale) == (True, True)
    assert centred_with_scale(np.array(learner), learner_scale) == (True, True)


# --------------------------------------------------------------------------------------------
# The runner on tiny grids

TINY = fs.Settings(
    "fair-postprocessing",
    seeds=3,
    gammas=(0.0, 0.1),
    epsilons=(0.1, math.inf),
    datasets=("german",),
)
POST_KEYS = {
    "dataset", "seed", "method", "gamma", "epsilon", "upsample", "m", "noise_scale", "error",
    "violation", "fpr_gap", "tpr_gap", "status",
}  # fmt: skip


def _mean(rows: list[dict], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def test_postprocessing_rows_and_privacy_costs_fairness() -> None:
    out = fe.run_experiment(TINY)
    post = fe.select(out.rows, method="dp_postprocessing")
    assert len(post) == 3 * 2 * 2
    assert all(set(r) == POST_KEYS for r in post)
    assert all(0.0 <= r["error"] <= 1.0 and 0.0 <= r["violation"] <= 1.0 for r in post)
    assert len(fe.select(out.rows, method="base_model")) == 3
    # the non-private service meets the constraint better than the eps = 0.1 one, on average
    exact = fe.select(post, gamma=0.0, epsilon=math.inf)
    noisy = fe.select(post, gamma=0.0, epsilon=0.1)
    assert _mean(exact, "violation") < _mean(noisy, "violation")
    base = fe.select(out.rows, method="base_model")
    assert _mean(exact, "violation") < _mean(base, "violation")
    # same settings, same rows; another root seed, other splits and noise
    assert fe.run_experiment(TINY).rows == out.rows
    other = fe.run_experiment(dataclasses.replace(TINY, root_seed=1)).rows
    assert other != out.rows


def test_oracle_rows_upsampling_divides_the_noise() -> None:
    settings = fs.Settings(
        "fair-inprocessing",
        seeds=2,
        gammas=(0.1,),
        epsilons=(1.0, math.inf),
        datasets=("german",),
        upsample=(1, 10),
        rounds=3,
    )
    rows = fe.run_experiment(settings).rows
    oracle = fe.select(rows, method="dp_oracle_learner")
    assert len(oracle) == 2 * 2 * 2
    for seed in range(2):
        one = fe.select(oracle, seed=seed, epsilon=1.0, upsample=1)[0]
        ten = fe.select(oracle, seed=seed, epsilon=1.0, upsample=10)[0]
        assert ten["m"] == 10 * one["m"]
        assert ten["min_cell_size"] >= 10 * one["min_cell_size"]
        assert ten["learner_scale"] == pytest.approx(one["learner_scale"] / 10, rel=0.1)
        assert ten["auditor_scale"] == pytest.approx(one["auditor_scale"] / 10, rel=0.1)
        # repeating rows leaves the non-private game unchanged
        exact = [fe.select(oracle, seed=seed, epsilon=math.inf, upsample=u)[0] for u in (1, 10)]
        assert exact[0]["error"] == pytest.approx(exact[1]["error"], abs=1e-9)
    # at eps = 1 the learner's noise swamps it: far worse than without noise
    worse = _mean(fe.select(oracle, epsilon=1.0, upsample=1), "error")
    assert _mean(fe.select(oracle, epsilon=math.inf), "error") < worse - 0.1


def test_rows_do_not_depend_on_the_number_of_workers() -> None:
    small = dataclasses.replace(TINY, seeds=2)
    assert fe.run_experiment(small, workers=2).rows == fe.run_experiment(small).rows


def test_bad_settings_are_refused_with_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="fair-postprocessing"):
        fs.settings_for("fair-nothing")
    with pytest.raises(ValueError, match="seeds must be an integer >= 1"):
        fs.settings_for("fair-inprocessing", seeds=0)
    with pytest.raises(ValueError, match="adult"):
        fe.jobs_for(dataclasses.replace(TINY, datasets=("communities",)))
    with pytest.raises(ValueError, match="workers"):
        fe.run_experiment(TINY, workers=0)
    assert fs.settings_for("fair-convergence", seeds=3, quick=True).seeds == 3


def test_without_fairlearn_the_references_are_skipped_with_the_extra_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setattr(fs, "fairlearn_available", lambda: False)
    settings = fs.Settings(
        "fair-convergence", seeds=1, gammas=(0.05,), epsilons=(1.0, math.inf),
        datasets=("german",), rounds=2,
    )  # fmt: skip
    out = fe.run_experiment(settings)
    assert out.skipped and "biasleak[fair]" in out.skipped[0]
    assert not fe.select(out.rows, method="threshold_optimizer")
    assert fe.select(out.rows, method="dp_oracle_learner")
    report = write_fair_report(out, to=tmp_path, command="biasleak paper fair-convergence")
    assert "pip install 'biasleak[fair]'" in report.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# The reading is computed from the numbers


def _fake(gap_at: dict[float, float]) -> fe.Outcome:
    """Post-processing rows whose error sits ``gap_at[eps]`` points above the eps = inf one."""
    settings = dataclasses.replace(TINY, seeds=1, gammas=(0.0,), epsilons=(*gap_at, math.inf))
    rows = [
        {"dataset": "german", "seed": 0, "method": "base_model", "gamma": None,
         "epsilon": math.inf, "m": 400, "error": 0.3, "violation": 0.1, "status": "ok"},
    ]  # fmt: skip
    for eps, gap in [*gap_at.items(), (math.inf, 0.0)]:
        rows.append(
            {"dataset": "german", "seed": 0, "method": "dp_postprocessing", "gamma": 0.0,
             "epsilon": eps, "m": 400, "error": 0.3 + gap / 100, "violation": 0.02,
             "status": "ok"}
        )  # fmt: skip
    return fe.Outcome(settings, rows, 0.0, 1, [])


def test_reading_follows_the_numbers(tmp_path) -> None:
    late = write_fair_report(_fake({0.1: 5.0, 1.0: 3.0, 3.0: 0.5}), to=tmp_path / "a", command="x")
    assert "from eps = 3 on" in late.read_text(encoding="utf-8")
    early = write_fair_report(_fake({0.1: 0.2, 1.0: 0.1, 3.0: 0.0}), to=tmp_path / "b", command="x")
    assert "already at the smallest eps of the grid, 0.1" in early.read_text(encoding="utf-8")
    never = write_fair_report(_fake({0.1: 9.0, 1.0: 8.0, 3.0: 7.0}), to=tmp_path / "c", command="x")
    assert "at no eps of the grid" in never.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------
# The command


def test_paper_fair_quick_writes_the_report_and_figures(tmp_path, capsys) -> None:
    to = tmp_path / "pp"
    assert main(["paper", "fair-postprocessing", "--quick", "--to", str(to)]) == 0
    text = (to / "report.md").read_text(encoding="utf-8")
    assert f"biasleak paper fair-postprocessing --quick --to {to}" in text
    assert "## Reading" in text and "Communities and Crime" in text
    for name in ("pareto.png", "pareto.svg", "rows.csv"):
        assert (to / name).stat().st_size > 0
    image = pytest.importorskip("matplotlib.image").imread(to / "pareto.png")
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    assert float(np.ptp(image[..., :3])) > 0.5  # something is drawn, not a blank canvas
    assert "report:" in capsys.readouterr().out


def test_paper_fair_refuses_bad_options(tmp_path, capsys) -> None:
    assert main(["paper", "fair-inprocessing", "--seeds", "0", "--to", str(tmp_path)]) == 2
    assert "--seeds must be >= 1" in capsys.readouterr().err
    assert main(["paper", "table1", "--quick"]) == 2
    assert "--quick is for fair-postprocessing" in capsys.readouterr().err
    assert main(["paper", "fair-nothing"]) == 2
    assert "fair-convergence" in capsys.readouterr().err


def test_paper_help_lists_the_fair_experiments(capsys) -> None:
    assert list(FAIR_EXPERIMENTS) == [
        "fair-postprocessing",
        "fair-inprocessing",
        "fair-convergence",
    ]
    assert not set(FAIR_EXPERIMENTS) & set(PAPER_ITEMS)
    with pytest.raises(SystemExit):
        main(["paper", "--help"])
    out = "".join(capsys.readouterr().out.split())  # argparse wraps lines at hyphens
    assert all(name in out for name in FAIR_EXPERIMENTS) and "--quick" in out
