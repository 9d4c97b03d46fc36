"""Private audit releases against the worked examples of "Differential Privacy for Fairness Audits".

The tutorial's worked examples and its "Check Your Understanding" answers are the test vectors.
Where the tutorial states a realized noise value, the noise is added to the counts here and the
module's post-processing (:func:`rates`, :func:`rate_difference`) is checked on the result.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from biasleak.mechanisms.audit import (
    NEIGHBOURING_RULES,
    AuditPlan,
    CountRelease,
    laplace_scale,
    laplace_tail_probability,
    laplace_tail_threshold,
    rate_difference,
    rate_difference_noise_sd,
    rate_difference_noise_variance,
    rates,
    release_counts,
    release_counts_and_totals,
    separate_release_scales,
)

# -- worked example 1 ------------------------------------------------------------------------


def test_worked_example_1_released_rates_and_difference() -> None:
    n = [200, 100]
    counts = np.array([30.0, 18.0])
    b = laplace_scale(1, 0.5)
    assert b == 2.0
    released = counts + np.array([1.2, -0.8])
    np.testing.assert_allclose(released, [31.2, 17.2])
    np.testing.assert_allclose(rates(released, n), [0.156, 0.172])
    private = rate_difference(released, n)
    assert private == pytest.approx(-0.016)
    np.testing.assert_allclose(rates(counts, n), [0.150, 0.180])
    exact = rate_difference(counts, n)
    assert exact == pytest.approx(-0.030)
    assert private - exact == pytest.approx(0.014)


def test_rate_difference_noise_variance_formula() -> None:
    for b, na, nb in [(2.0, 200, 100), (1.0, 10, 10), (0.5, 1000, 3)]:
        want = 2 * b**2 * (1 / na**2 + 1 / nb**2)
        assert rate_difference_noise_variance(b, na, nb) == pytest.approx(want)
        assert rate_difference_noise_sd(b, na, nb) == pytest.approx(math.sqrt(want))


# -- worked example 2 ------------------------------------------------------------------------


def test_worked_example_2_released_rates_and_difference() -> None:
    n = [250, 150]
    counts = [40, 30]
    b = laplace_scale(1.0, 0.5)
    assert b == 2.0
    released = np.add(counts, [2.0, -1.0])
    np.testing.assert_allclose(released, [42.0, 29.0])
    np.testing.assert_allclose(rates(released, n), [0.168, 0.1933333333])
    private = rate_difference(released, n)
    assert private == pytest.approx(-0.0253333333)
    exact = rate_difference(counts, n)
    assert exact == pytest.approx(0.160 - 0.200)
    assert private - exact == pytest.approx(0.014667, abs=1e-6)


def test_worked_example_2_noise_spread_halves_when_epsilon_doubles() -> None:
    var_half = rate_difference_noise_variance(laplace_scale(1, 0.5), 250, 150)
    assert var_half == pytest.approx(2 * 4 * (1 / 250**2 + 1 / 150**2))
    assert var_half == pytest.approx(0.000483556, abs=1e-9)
    sd_half = rate_difference_noise_sd(laplace_scale(1, 0.5), 250, 150)
    assert sd_half == pytest.approx(0.0220, abs=5e-5)
    var_one = rate_difference_noise_variance(laplace_scale(1, 1.0), 250, 150)
    assert var_one == pytest.approx(0.000120889, abs=1e-9)
    sd_one = rate_difference_noise_sd(laplace_scale(1, 1.0), 250, 150)
    assert sd_one == pytest.approx(0.0110, abs=5e-5)
    assert sd_one == pytest.approx(sd_half / 2)
    assert var_one == pytest.approx(var_half / 4)


# -- worked example 3 ------------------------------------------------------------------------


def test_worked_example_3_separate_releases() -> None:
    total, scales = separate_release_scales([0.2, 0.3])
    assert total == 0.5  # exact basic composition
    assert scales == pytest.approx([5.0, 3.3333333333])
    assert math.log(20) == pytest.approx(2.9957, abs=1e-4)
    thresholds = [laplace_tail_threshold(b, 0.05) for b in scales]
    assert thresholds == pytest.approx([5 * math.log(20), 10 / 3 * math.log(20)])
    assert thresholds == pytest.approx([14.98, 9.99], abs=5e-3)
    for b, t in zip(scales, thresholds, strict=True):
        assert laplace_tail_probability(b, t) == pytest.approx(0.05)
    # one vector release at the total budget uses scale 2 in both cells
    assert laplace_scale(1, total) == 2.0
    assert all(b > laplace_scale(1, total) for b in scales)


def test_separate_release_scales_with_sensitivity() -> None:
    total, scales = separate_release_scales([0.5, 1.0, 0.25], sensitivity=2)
    assert total == 1.75
    assert scales == pytest.approx([4.0, 2.0, 8.0])


# -- check your understanding ----------------------------------------------------------------


def test_cyu_1_scale_from_sensitivity_and_epsilon() -> None:
    assert laplace_scale(3, 0.6) == pytest.approx(5.0)


def test_cyu_2_tail_probability() -> None:
    p = laplace_tail_probability(4, 8)
    assert p == pytest.approx(math.exp(-2))
    assert p == pytest.approx(0.1353, abs=1e-4)
    assert laplace_tail_threshold(4, p) == pytest.approx(8.0)
    assert laplace_tail_probability(4, 0) == 1.0


def test_cyu_3_private_rate_difference() -> None:
    released = np.add([20, 30], [1, -2])
    assert laplace_scale(1, 1) == 1.0
    assert rate_difference(released, [100, 200]) == pytest.approx(21 / 100 - 28 / 200)
    assert rate_difference(released, [100, 200]) == pytest.approx(0.0700)


def test_cyu_4_separate_budgets() -> None:
    total, scales = separate_release_scales([0.15, 0.25])
    assert total == 0.4
    assert scales == pytest.approx([6.6667, 4.0], abs=1e-4)


def test_cyu_5_rate_difference_noise_sd() -> None:
    sd = rate_difference_noise_sd(2, 100, 100)
    assert sd == pytest.approx(math.sqrt(2 * 4 * (1 / 100**2 + 1 / 100**2)))
    assert sd == pytest.approx(0.0400)


# -- releases --------------------------------------------------------------------------------


def test_release_counts_adds_laplace_draws_of_the_same_seed() -> None:
    counts = np.array([30, 18, 0, 7])
    rel = release_counts(counts, epsilon=0.5, rng=np.random.default_rng(42))
    assert isinstance(rel, CountRelease)
    assert (rel.scale, rel.epsilon, rel.sensitivity) == (2.0, 0.5, 1.0)
    draws = np.random.default_rng(42).laplace(0.0, 2.0, counts.shape)
    np.testing.assert_array_equal(rel.counts, counts + draws)
    rel3 = release_counts(counts, epsilon=0.6, sensitivity=3, rng=np.random.default_rng(7))
    assert rel3.scale == pytest.approx(5.0)
    draws3 = np.random.default_rng(7).laplace(0.0, rel3.scale, counts.shape)
    np.testing.assert_array_equal(rel3.counts, counts + draws3)


def test_release_counts_and_totals_uses_sensitivity_two() -> None:
    counts, totals = [30, 18], [200, 100]
    rel, implied = release_counts_and_totals(
        counts, totals, epsilon=0.5, rng=np.random.default_rng(3)
    )
    assert rel.sensitivity == 2.0
    assert rel.scale == pytest.approx(2 / 0.5)
    assert rel.epsilon == 0.5
    draws = np.random.default_rng(3).laplace(0.0, 4.0, 4)
    np.testing.assert_array_equal(rel.counts, np.array([30, 18, 200, 100]) + draws)
    np.testing.assert_allclose(implied, rel.counts[:2] / rel.counts[2:])


def test_private_rate_difference_variance_matches_formula() -> None:
    # Var of the sample variance of n draws is about (2 + excess kurtosis) Var^2 / n; the excess
    # kurtosis of Z_A/250 - Z_B/150 is 3 (w_A^4 + w_B^4) / (w_A^2 + w_B^2)^2 = 1.83, so with
    # n = 20_000 the relative standard error is sqrt(3.83 / n) = 1.4 % and the 7 % tolerance is
    # five standard errors.
    rng = np.random.default_rng(20240601)
    n = [250, 150]
    counts = [40, 30]
    eps = 0.5
    diffs = np.array(
        [
            rate_difference(release_counts(counts, epsilon=eps, rng=rng).counts, n)
            for _ in range(20_000)
        ]
    )
    want = rate_difference_noise_variance(laplace_scale(1, eps), *n)
    assert np.var(diffs, ddof=1) == pytest.approx(want, rel=0.07)
    # the noise is centred: the mean is within five standard errors of the true difference
    assert abs(diffs.mean() - (-0.040)) < 5 * math.sqrt(want / diffs.size)


# -- audit plan ------------------------------------------------------------------------------


def test_audit_plan_fields_scale_and_description() -> None:
    plan = AuditPlan(
        protected_unit="one applicant's record",
        neighbouring_rule="add_remove",
        query="false-negative counts by group",
        sensitivity=1,
        epsilon=0.5,
        denominators_public=True,
    )
    assert plan.neighbouring_rule in NEIGHBOURING_RULES
    assert plan.delta == 0.0
    assert plan.scale == 2.0
    text = plan.describe()
    assert "one applicant's record" in text
    assert "add/remove" in text
    assert "false-negative counts by group" in text
    assert "L1 sensitivity 1" in text
    assert "0.5-differential privacy" in text
    assert "b = 2" in text
    assert "public" in text and "confidential" not in text


def test_audit_plan_with_private_denominators_and_delta() -> None:
    plan = AuditPlan(
        protected_unit="one patient",
        neighbouring_rule="replace_one",
        query="counts and group sizes",
        sensitivity=2,
        epsilon=1.0,
        denominators_public=False,
        delta=1e-6,
    )
    assert plan.scale == 2.0
    text = plan.describe()
    assert "replace one" in text
    assert "L1 sensitivity 2" in text
    assert "(1, 1e-06)-differential privacy" in text
    assert "confidential" in text and "released privately" in text


def test_neighbouring_rules() -> None:
    assert NEIGHBOURING_RULES == ("add_remove", "change_protected_attribute", "replace_one")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("counts", [[30, -1], [math.nan, 18], [math.inf, 1], ["a", 1], [[1, 2]]])
def test_release_counts_refuses_bad_counts(counts: object) -> None:
    with pytest.raises(ValueError, match="counts"):
        release_counts(counts, epsilon=1.0, rng=np.random.default_rng(0))  # type: ignore[arg-type]


def test_release_counts_and_totals_refuses_bad_input() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="totals"):
        release_counts_and_totals([1, 2], [10, -1], epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match="one entry per count"):
        release_counts_and_totals([1, 2], [10, 20, 30], epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match="counts"):
        release_counts_and_totals([1, math.nan], [10, 20], epsilon=1.0, rng=rng)
    with pytest.raises(ValueError, match="epsilon"):
        release_counts_and_totals([1, 2], [10, 20], epsilon=0.0, rng=rng)


@pytest.mark.parametrize(
    "denominators", [[100, 0], [100, -5], [100, math.nan], [100, math.inf], [100], [1, 2, 3]]
)
def test_rates_refuse_bad_denominators(denominators: list[float]) -> None:
    with pytest.raises(ValueError, match="denominators"):
        rates([20, 30], denominators)
    with pytest.raises(ValueError, match="denominators"):
        rate_difference([20, 30], denominators)


def test_rate_difference_needs_two_groups() -> None:
    with pytest.raises(ValueError, match="exactly two groups"):
        rate_difference([1, 2, 3], [10, 10, 10])
    # noisy counts may be negative or fractional: that is not an error
    assert rates([-0.5, 2.5], [10, 10]) == pytest.approx([-0.05, 0.25])


@pytest.mark.parametrize("epsilon", [0, -0.5, math.nan, math.inf, "1"])
def test_epsilon_must_be_positive_and_finite(epsilon: object) -> None:
    with pytest.raises(ValueError, match="epsilon"):
        laplace_scale(1, epsilon)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        release_counts([1, 2], epsilon=epsilon, rng=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        separate_release_scales([0.5, epsilon])  # type: ignore[list-item]


@pytest.mark.parametrize("sensitivity", [0, -1, math.nan, math.inf])
def test_sensitivity_must_be_positive(sensitivity: float) -> None:
    with pytest.raises(ValueError, match="sensitivity"):
        laplace_scale(sensitivity, 1.0)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, math.nan, "0.05"])
def test_tail_threshold_needs_p_in_open_unit_interval(p: object) -> None:
    with pytest.raises(ValueError, match="p must lie in"):
        laplace_tail_threshold(2.0, p)  # type: ignore[arg-type]


def test_tail_and_variance_inputs_are_checked() -> None:
    with pytest.raises(ValueError, match="scale"):
        laplace_tail_probability(0.0, 1.0)
    with pytest.raises(ValueError, match="t must"):
        laplace_tail_probability(1.0, -1.0)
    with pytest.raises(ValueError, match="scale"):
        laplace_tail_threshold(-1.0, 0.05)
    with pytest.raises(ValueError, match="n_a"):
        rate_difference_noise_variance(2.0, 0, 100)
    with pytest.raises(ValueError, match="n_b"):
        rate_difference_noise_sd(2.0, 100, -1)


PLAN = {
    "protected_unit": "one applicant's record",
    "neighbouring_rule": "add_remove",
    "query": "false-negative counts by group",
    "sensitivity": 1.0,
    "epsilon": 0.5,
    "denominators_public": True,
}


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("protected_unit", "", "protected_unit"),
        ("protected_unit", "   ", "protected_unit"),
        ("query", "", "query"),
        ("neighbouring_rule", "add-remove", "did you mean 'add_remove'"),
        ("neighbouring_rule", "swap", "neighbouring_rule"),
        ("sensitivity", 0.0, "sensitivity"),
        ("epsilon", 0.0, "epsilon"),
        ("epsilon", math.inf, "epsilon"),
    ],
)
def test_audit_plan_refuses_bad_fields(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuditPlan(**{**PLAN, field: value})  # type: ignore[arg-type]


def test_rates_refuse_non_finite_counts() -> None:
    with pytest.raises(ValueError, match="counts must be finite"):
        rates([float("nan"), 1.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="counts must be finite"):
        rate_difference([float("inf"), 1.0], [1.0, 1.0])
    assert rates([-0.5, 1.0], [1.0, 2.0]).tolist() == [-0.5, 0.5]


def test_tail_threshold_accepts_numpy_floats() -> None:
    assert laplace_tail_threshold(2.0, np.float32(0.05)) == pytest.approx(
        2.0 * math.log(20.0), rel=1e-6
    )
