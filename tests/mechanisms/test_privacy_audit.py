"""Empirical privacy audits: Clopper-Pearson bounds, lower bounds from counts, the one-run
canary bound, worst queries, twins, the audit suite of every mechanism, and ``biasleak audit``.

The suite (``test_real_mechanism_passes_and_twins_are_caught``) audits each mechanism (raw
bounding, safe sampler) on a synthetic audit set of n = 100 people with a small group of 10,
against the flip and swap pairs the ceiling module claims at the audit-set level: 2 x 10^5
releases per world and pair (10^5 for the Gaussian), half to choose the test, half to measure
it. Each variant is judged by 4 lower bounds (epsilon and TV for the flip and for the swap),
each at 1 - 0.05/4 one-sided Clopper-Pearson confidence, so a correct mechanism is flagged with
probability at most 5% per variant (Bonferroni; the seeds are fixed, so the outcome is
deterministic). Over 20 other seeds no real mechanism was flagged and every twin tested here
was caught.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from biasleak.mechanisms import privacy_audit as pa
from biasleak.mechanisms.ceiling import AuditSizes, Pair, ReleaseSpec, release_pairs
from biasleak.mechanisms.gaussian_sigma import analytic_gaussian_sigma
from biasleak.mechanisms.metrics import evaluate
from biasleak.mechanisms.release import release
from biasleak.mechanisms.sensitivity import global_sensitivity, local_sensitivity
from biasleak.sim.cli import main
from biasleak.sim.privacy_audit import audit_scenario
from biasleak.sim.scenario import load_scenario

TRIALS = 200_000
ALPHA = 0.05 / 4  # 4 bounds per mechanism variant: flip and swap, epsilon and TV


# -- Clopper-Pearson and the bounds from counts ---------------------------------------------------


def test_clopper_pearson_matches_known_values() -> None:
    lo, hi = pa.clopper_pearson(5, 10, 0.95)
    assert float(lo) == pytest.approx(0.187086, abs=1e-6)  # the textbook 5/10 interval
    assert float(hi) == pytest.approx(0.812914, abs=1e-6)
    lo, hi = pa.clopper_pearson(0, 10, 0.95)  # closed forms at the ends: 1 - (alpha/2)^(1/n)
    assert float(lo) == 0.0
    assert float(hi) == pytest.approx(1.0 - 0.025 ** (1 / 10), rel=1e-12)
    lo, hi = pa.clopper_pearson(10, 10, 0.95)
    assert float(lo) == pytest.approx(0.025 ** (1 / 10), rel=1e-12)
    assert float(hi) == 1.0


@pytest.mark.parametrize(("k", "n"), [(1, 20), (37, 100), (999, 1000)])
def test_one_sided_bounds_solve_the_binomial_tails(k: int, n: int) -> None:
    alpha = 0.01
    lo, hi = float(pa.cp_lower(k, n, alpha)), float(pa.cp_upper(k, n, alpha))
    assert stats.binom.sf(k - 1, n, lo) == pytest.approx(alpha, rel=1e-8)  # P[X >= k | lo]
    assert stats.binom.cdf(k, n, hi) == pytest.approx(alpha, rel=1e-8)  # P[X <= k | hi]
    with pytest.raises(ValueError, match="successes <= trials"):
        pa.cp_lower(n + 1, n, alpha)
    with pytest.raises(ValueError, match="alpha must be in"):
        pa.cp_upper(k, n, 1.5)


def test_epsilon_and_tv_lower_bounds_on_hand_made_counts() -> None:
    n, a = 1000, 0.05
    # a perfect test: every P draw inside, no Q draw: closed forms (alpha/2)^(1/n)
    r = (a / 2) ** (1 / n)
    assert pa.epsilon_lower_bound(n, n, 0, n, alpha=a) == pytest.approx(math.log(r / (1 - r)))
    assert pa.tv_lower_bound(n, n, 0, n, alpha=a) == pytest.approx(2 * r - 1)
    # 900 of 1000 against 100 of 1000: log(TPR_lo / FPR_hi) from the beta quantiles
    tpr = stats.beta.ppf(a / 2, 900, 101)
    fpr = stats.beta.isf(a / 2, 101, 900)
    assert pa.epsilon_lower_bound(900, n, 100, n, alpha=a) == pytest.approx(math.log(tpr / fpr))
    assert pa.epsilon_lower_bound(900, n, 100, n, delta=0.1, alpha=a) == pytest.approx(
        math.log((tpr - 0.1) / fpr)
    )
    assert pa.tv_lower_bound(900, n, 100, n, alpha=a) == pytest.approx(tpr - fpr)
    # a test that tells nothing gives nothing
    assert pa.epsilon_lower_bound(500, n, 500, n) == 0.0
    assert pa.tv_lower_bound(500, n, 500, n) == 0.0


def test_claimed_epsilon_of_every_pair_family() -> None:
    assert pa.claimed_epsilon(Pair("laplace", 0.3)) == 0.3
    assert pa.claimed_epsilon(Pair("pure", 0.7)) == 0.7
    assert pa.claimed_epsilon(Pair("approx", 1.0, 1e-6)) == 1.0
    assert pa.claimed_epsilon(Pair("approx", 1.0, 1e-6), delta=0.0) == math.inf
    assert pa.claimed_epsilon(Pair("exact")) == math.inf
    cauchy = Pair("cauchy", 0.5)
    assert pa.claimed_epsilon(cauchy) == cauchy.max_loss
    eps = pa.claimed_epsilon(Pair("laplace", 0.3), delta=0.01)  # bisection on the profile
    assert float(Pair("laplace", 0.3).profile(np.array([eps]))[0]) == pytest.approx(0.01)


# -- the one-run canary bound ------------------------------------------------------------------


def test_one_run_bound_is_the_binomial_tail_inverted() -> None:
    alpha = 0.05
    p = alpha ** (1 / 10)  # 10 of 10 right: P[Binomial(10, p) >= 10] = p^10 = alpha
    assert pa.one_run_epsilon_lower_bound(10, 10, alpha=alpha) == pytest.approx(
        math.log(p / (1 - p))
    )
    eps = pa.one_run_epsilon_lower_bound(70, 100, alpha=alpha)
    p_eps = math.exp(eps) / (1 + math.exp(eps))
    assert stats.binom.sf(69, 100, p_eps) == pytest.approx(alpha, rel=1e-8)
    assert pa.one_run_epsilon_lower_bound(50, 100, alpha=alpha) == 0.0


def test_canary_audit_flags_exact_answers_claimed_private() -> None:
    rng = np.random.default_rng(3)
    truth = rng.integers(0, 2, size=200).astype(bool)
    scores = np.where(truth, 1.0, -1.0) * rng.uniform(0.5, 1.0, size=200)  # noiseless probes
    result = pa.canary_audit(scores, truth, alpha=0.05)
    assert result.correct == result.guesses == 200
    p = (0.05 / len(result.tried)) ** (1 / 200)  # all right, Bonferroni over the guess counts
    assert result.epsilon == pytest.approx(math.log(p / (1 - p)))
    assert result.epsilon > 3.5  # far above, e.g., a claimed pure epsilon of 0.5
    coin = pa.canary_audit(rng.normal(size=200), truth, alpha=0.05)  # guesses unrelated to truth
    assert coin.epsilon < 0.5


def test_composed_pure_epsilon_refuses_delta() -> None:
    assert pa.composed_pure_epsilon([(Pair("laplace", 0.1), 5), (Pair("pure", 0.2), 1)]) == (
        pytest.approx(0.7)
    )
    assert pa.composed_pure_epsilon([(Pair("approx", 1.0, 1e-6), 1)]) == math.inf


# -- worst queries and twins ---------------------------------------------------------------------


def _audit_set(n: int, n0: int) -> np.ndarray:
    a = np.ones(n, dtype=bool)
    a[:n0] = False
    return a


@pytest.mark.parametrize("metric", ["sp", "abs_sp", "eo", "abs_eo"])
def test_flip_values_match_evaluate_on_every_neighbour(metric: str) -> None:
    rng = np.random.default_rng(5)
    n = 12
    a = _audit_set(n, 4)
    y = rng.integers(0, 2, size=n).astype(bool)
    y[[0, 1, 5, 6]] = True  # two people with y = 1 in each group
    h = rng.uniform(size=(3, n))
    after = pa.flip_values(metric, h, protected=a, labels=y)
    for i in range(n):
        b = a.copy()
        b[i] = ~b[i]
        assert np.allclose(after[:, i], evaluate(metric, h, protected=b, labels=y), atol=1e-12)


def test_worst_queries_reach_the_largest_shifts() -> None:
    a = _audit_set(100, 10)
    probes = np.zeros((2, 100))
    probes[0, 0] = probes[1, 99] = 1.0
    flip = pa.worst_flip("sp", probes, protected=a)
    assert flip.shift == pytest.approx(local_sensitivity("sp", n1=90, n0=10), rel=1e-12)
    assert flip.persons == (0,) and flip.model == 0  # the small group's member moves
    swap = pa.worst_swap("sp", probes, protected=a)
    assert swap.shift == pytest.approx(1 / 90 + 1 / 10, rel=1e-12)
    assert int(swap.protected.sum()) == int(a.sum())  # a swap keeps the sizes


@pytest.mark.parametrize(
    ("mechanism", "delta"),
    [("laplace", 0.0), ("attribute_conceal", 0.0), ("smooth_laplace", 1e-6), ("gaussian", 1e-3)],
)
@pytest.mark.parametrize("models", [1, 7])
def test_twin_at_factor_one_is_the_real_release(mechanism: str, delta: float, models: int) -> None:
    eps = 0.8 * models
    rel = release(
        mechanism,
        np.full(models, 0.05),
        n1=90,
        n0=10,
        epsilon=eps,
        delta=delta * models,
        rng=np.random.default_rng(0),
    )
    twin = pa.Twin(mechanism, eps, delta * models, models)
    assert twin.scale(n1=90, n0=10) == rel.noise_scale
    draws = twin.draw(np.full(1000, 0.05), n1=90, n0=10, rng=np.random.default_rng(1))
    assert np.all(np.round(draws / rel.grid) * rel.grid == draws)  # the same grid
    half = pa.Twin(mechanism, eps, delta * models, models, factor=0.5)
    assert half.scale(n1=90, n0=10) == pytest.approx(0.5 * rel.noise_scale, rel=1e-5)


# -- the suite: every mechanism, its real release and its under-noised twins ----------------------

SUITE = {
    # mechanism: (per-model epsilon, delta, n, N0, releases per world)
    "laplace": (6.0, 0.0, 100, 10, TRIALS),
    "attribute_conceal": (8.0, 0.0, 100, 10, TRIALS),
    "smooth_laplace": (4.0, 1e-6, 100, 10, TRIALS),
    "gaussian": (2.0, 1e-3, 100, 2, TRIALS // 2),  # the discrete Gaussian sampler is the slowest
}


def _suite(mechanism: str, factor: float, seed: int) -> list[pa.SampleAudit]:
    eps, delta, n, n0, trials = SUITE[mechanism]
    a = _audit_set(n, n0)
    rng = np.random.default_rng(seed)
    probes = np.zeros((2, n))
    probes[0, 0] = probes[1, n - 1] = 1.0
    flips, swaps = release_pairs(
        ReleaseSpec(mechanism, eps, delta, 1, "raw", "sp", n), "audit_set", AuditSizes(n - n0, n0)
    )
    twin = pa.Twin(mechanism, eps, delta, factor=factor)
    out = []
    for nb, pairs in (
        (pa.worst_flip("sp", probes, protected=a), flips),
        (pa.worst_swap("sp", probes, protected=a), swaps),
    ):
        b = nb.protected
        x_p = twin.draw(np.full(trials, nb.before), n1=int(a.sum()), n0=n0, rng=rng)
        x_q = twin.draw(np.full(trials, nb.after), n1=int(b.sum()), n0=int((~b).sum()), rng=rng)
        out.append(pa.audit_samples(x_p, x_q, claim=pairs[0][0], alpha=ALPHA))
    return out


CASES = [
    (mechanism, factor)
    for mechanism in SUITE
    for factor in (1.0, 0.9, 0.5)
    if not (mechanism == "gaussian" and factor == 0.9)  # within the claims: see below
]


@pytest.mark.parametrize(("mechanism", "factor"), CASES)
def test_real_mechanism_passes_and_twins_are_caught(mechanism: str, factor: float) -> None:
    """The real release (factor 1) exceeds no claim; its twins at 0.9 and 0.5 exceed one.

    Attribute-Conceal's flip claim is its eps-DP guarantee (pure at eps = 8 here), whose true
    worst-case loss is far lower: its twins cannot be caught against it, and are caught against
    the swap claim (a Cauchy shift, whose total variation is tight). The Gaussian is audited on
    an audit set whose small group has 2 people, where one flip moves an answer by the global
    sensitivity its noise is calibrated to: with a small group of 10 to 30 the flip moves it by
    about a fifth of that (``test_gaussian_twins_within_the_claims``) and even the 0.5 twin is
    within the claims, which for the Gaussian are its (eps, delta) guarantee at both levels.
    """
    audits = _suite(mechanism, factor, seed=list(SUITE).index(mechanism) * 10 + int(factor * 10))
    exceeded = [name for audit in audits for name in audit.exceeded]
    if factor == 1.0:
        assert exceeded == [], [(a.claimed_epsilon, a.epsilon.value, a.tv.value) for a in audits]
    else:
        assert exceeded, [
            (a.claimed_epsilon, a.epsilon.value, a.claimed_tv, a.tv.value) for a in audits
        ]
    if mechanism == "attribute_conceal":
        assert audits[0].exceeded == ()  # the flip claim is loose: nothing can exceed it


def test_gaussian_twins_within_the_claims() -> None:
    """The twins the suite does not try to catch are provably within the claims.

    (1) Factor 0.9, small group of 2 (eps 2, delta 1e-3): the safe sampler's discrete Gaussian
    is calibrated through zCDP, 11% wider than the analytic Gaussian that meets (eps, delta)
    exactly at the global sensitivity, so 0.9 times it is still wider. Its sigma is over 2^20 grid
    steps, where the discrete Gaussian's privacy profile is the continuous one's (to far below
    1e-100) and rounding adds at most one step to the shift: the twin's flip is a Gaussian shift
    within (eps, delta), and no test can exceed the flip claim (nor the swap claim, group privacy
    of it). (2) Factor 0.5, small group of 20 in 200 (eps 1, delta 1e-6): a flip moves an answer
    by ``1/181 + 1/20``, 11% of the global sensitivity, so the twin's shift in units of its sigma
    is below what the analytic Gaussian allows: within the claims again.
    """
    eps, delta, n, *_ = SUITE["gaussian"]
    gs = global_sensitivity("sp", n=n, norm="l2")
    sigma = pa.Twin("gaussian", eps, delta, factor=0.9).scale(n1=n - 2, n0=2)
    assert sigma >= analytic_gaussian_sigma(l2_sensitivity=gs, epsilon=eps, delta=delta) * (
        1 + 2.0**-19
    )
    ls = local_sensitivity("sp", n1=180, n0=20)
    sigma = pa.Twin("gaussian", 1.0, 1e-6, factor=0.5).scale(n1=180, n0=20)
    analytic = analytic_gaussian_sigma(
        l2_sensitivity=global_sensitivity("sp", n=200, norm="l2"), epsilon=1.0, delta=1e-6
    )
    assert ls / sigma < global_sensitivity("sp", n=200, norm="l2") / analytic


# -- the runner and the command line -------------------------------------------------------------


def _scenario(tmp_path: Path, noise: str, extra: str = "") -> Path:
    path = tmp_path / "audit.yaml"
    path.write_text(
        f"""
name: audit_small
seed: 3
data: {{dataset: synthetic, n: 100, minority: 10}}
developers:
  - id: mallory
    organization: acme
    strategy: {{kind: single_query, targets: [0, 1]}}
  - id: alice
    organization: acme
    strategy: {{kind: honest_selection, candidates: 3}}
compliance:
  metrics: [sp]
  policy:
    - {noise}
{extra}""",
        encoding="utf-8",
    )
    return path


def test_cli_audit_passes_the_real_release_and_flags_a_twin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(
        tmp_path,
        "{kind: noise, mechanism: laplace, epsilon: 4.0}",
        "privacy_audit: {trials: 40000, canaries: 20}",
    )
    assert main(["audit", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"] == "no claim exceeded"
    assert report["trials"] == 40000  # from the scenario's privacy_audit block
    labels = [p["label"] for p in report["pairs"]]
    assert labels == ["flip, worst query", "swap, worst query", "mallory: flip", "mallory: swap"]
    assert [c["canaries"] for c in report["canaries"]] == [20, 10]
    assert report["bounds"] == 2 * 4 + 2
    assert main(["audit", str(path), "--scale-factor", "0.5"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("verdict: DEFECT")
    assert "UNDER-NOISED TWIN" in out


def test_cli_audit_bad_input_and_exact_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(tmp_path, "{kind: noise, mechanism: exact}")
    assert main(["audit", str(path), "--trials", "1"]) == 2
    assert "--trials must be between 4" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "missing.yaml")]) == 2
    capsys.readouterr()
    assert main(["audit", str(path)]) == 0
    assert "verdict: nothing to audit" in capsys.readouterr().out


def test_runner_refuses_the_one_run_bound_with_delta_and_notes_naive(tmp_path: Path) -> None:
    path = _scenario(
        tmp_path,
        "{kind: noise, mechanism: smooth_laplace, epsilon: 2.0, delta: 1.0e-6, sampler: naive}",
    )
    report = audit_scenario(load_scenario(path), trials=2000, canaries=8)
    flip = next(c for c in report.canaries if c.design == "flip")
    assert flip.result is None and flip.note.startswith("the one-run canary bound is implemented")
    swap = next(c for c in report.canaries if c.design == "swap")
    assert swap.result is not None  # the swap pair of smooth_laplace is a pure Laplace shift
    assert any("naive" in note for note in report.notes)


def test_cli_audit_scenario_block_is_strict_and_ctrl_c_stops(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    noise = "{kind: noise, mechanism: laplace, epsilon: 1.0}"
    for block, problem in (
        ("privacy_audit: {trials: 2}", "privacy_audit.trials"),
        ("privacy_audit: {trails: 100}", "privacy_audit.trails"),
    ):
        assert main(["audit", str(_scenario(tmp_path, noise, block))]) == 2
        assert problem in capsys.readouterr().err

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("biasleak.sim.privacy_audit.audit_scenario", interrupted)
    assert main(["audit", str(_scenario(tmp_path, noise))]) == 130
    assert capsys.readouterr().err.startswith("biasleak audit: interrupted; nothing was written")


def test_run_and_redteam_quote_the_audit_in_their_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    noise = "{kind: noise, mechanism: laplace, epsilon: 4.0}"
    logs = str(tmp_path / "logs")
    plain = _scenario(tmp_path, noise)
    assert main(["run", str(plain), "--log-dir", logs, "--target", "70"]) == 0
    assert "privacy audit" not in capsys.readouterr().out  # neither --audit nor a block
    block = "privacy_audit: {trials: 4000, canaries: 10}\nred_team: {attacks: [single_query]}"
    path = _scenario(tmp_path, noise, block)
    assert main(["run", str(path), "--log-dir", logs, "--target", "70", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["privacy_audit"]["trials"] == 4000  # the block's, as biasleak audit uses
    headline = summary["verdict"]["privacy_audit"]
    assert headline["verdict"] == "no claim exceeded" and headline["defects"] == 0
    assert headline["bounds"] == summary["privacy_audit"]["bounds"]
    assert "; the privacy audit from below exceeds no claim (" in summary["verdict"]["text"]
    assert main(["redteam", str(path), "--log-dir", logs, "--target", "70"]) == 0
    verdict = capsys.readouterr().out.splitlines()[1]
    assert verdict.startswith("verdict: ") and "the privacy audit from below exceeds" in verdict
    # the red team's strongest attacker's own first query is audited beside the scenario's
    both = _scenario(
        tmp_path,
        noise,
        "privacy_audit: {trials: 4000, canaries: 10}\n"
        "red_team: {attacks: [single_query, compressed_sensing]}",
    )
    assert main(["redteam", str(both), "--log-dir", logs, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    labels = [pair["label"] for pair in result["privacy_audit"]["pairs"]]
    strongest = result["strongest"]["kind"]
    assert f"{strongest}: flip" in labels and f"{strongest}: swap" in labels
    assert "mallory: flip" in labels  # the scenario's own attacker still

    # an under-noised release: the audit refutes the claims, and no level may be called safe
    real = audit_scenario

    def twin(*args: object, **kwargs: object) -> object:
        return real(*args, **{**kwargs, "scale_factor": 0.5})  # type: ignore[arg-type]

    monkeypatch.setattr("biasleak.sim.privacy_audit.audit_scenario", twin)
    assert main(["run", str(plain), "--log-dir", logs, "--target", "70", "--audit"]) == 1
    verdict = capsys.readouterr().out.splitlines()[1]
    assert verdict.startswith("verdict: not proven at target 70%: ")
    assert "DEFECT: the privacy audit from below found" in verdict
    assert "safe" not in verdict
