"""The verdict at a risk target: the strongest statement the numbers support, never more."""

from __future__ import annotations

from biasleak.sim.safety import person_bound, safety, worst_ceilings

CEILINGS = {
    "leakage_ceiling": 97.0,
    "audit_set_ceiling": 58.0,
    "answers_ceiling": 55.0,
    "person_ceiling": 61.0,
}


def test_an_attack_above_the_target_is_unsafe_whatever_the_ceilings() -> None:
    # the ceilings bound an attacker without side information; a measured leak is a fact
    text = safety(60.6, CEILINGS, 60.0)
    assert text.startswith("unsafe at target 60%: the strongest attack reached 60.6%, above it")
    side = safety(60.6, {**CEILINGS, "strongest_side_information": True}, 60.0)
    assert "reached 60.6% (starting from a proxy model's side information), above it" in side


def test_public_data_above_the_target_rule_out_every_policy() -> None:
    text = safety(56.0, CEILINGS, 60.0, public=65.4)
    assert text.startswith("no policy can be safe at target 60%")
    assert "the public data alone reveal 65.4%" in text
    assert "these answers add at most 11.0 points (with what a proxy model knows" in text
    assert "65.4%: at most 76.4%)" in text


def test_each_level_is_named_when_it_is_the_strongest_that_holds() -> None:
    assert safety(52.0, CEILINGS, 60.0, public=55.0).startswith("safe for this audit set")
    assert "without side information" in safety(52.0, CEILINGS, 60.0)
    assert safety(52.0, {**CEILINGS, "audit_set_ceiling": 70.0}, 60.0).startswith(
        "safe with these answers"
    )
    assert safety(52.0, {**CEILINGS, "leakage_ceiling": 59.0}, 60.0).startswith(
        "safe by the policy's guarantee"
    )
    assert safety(
        52.0, {**CEILINGS, "answers_ceiling": 62.0, "audit_set_ceiling": 70.0}, 60.0
    ).startswith("not proven")
    plain = safety(52.0, CEILINGS, None, public=65.4)
    assert plain == (
        "strongest attack 52.0%; ceilings: policy 97.0%, audit set 58.0%, answers 55.0%; "
        "the public data alone: 65.4% (a proxy model)"
    )


def test_the_worst_party_of_a_run_is_its_guarantee() -> None:
    summary = {
        "organizations": {
            "a": {**CEILINGS, "person_ceiling": {"policy": 80.0, "audit_set": 70.0}},
            "b": {**CEILINGS, "answers_ceiling": 57.0, "person_ceiling": {"answers": 66.0}},
        },
        "developers": {
            "solo": {"organization": None, **CEILINGS, "person_ceiling": {"answers": 52.0}},
            "member": {"organization": "a", **CEILINGS, "answers_ceiling": 99.0},
        },
    }
    worst = worst_ceilings(summary)
    assert worst["answers_ceiling"] == 57.0  # a member is judged with its organisation
    assert worst["person_ceiling"] == 70.0  # the tightest level known per party, then the max
    assert person_bound({"person_ceiling": None}) is None


def test_the_audit_closes_the_verdict_and_a_defect_withdraws_every_level() -> None:
    clean = {
        "verdict": "no claim exceeded",
        "defects": 0,
        "bounds": 10,
        "confidence": 0.95,
        "closest": {"label": "mallory: flip", "epsilon_lower": 0.021, "claimed_epsilon": 0.05},
    }
    text = safety(52.0, CEILINGS, 60.0, audit=clean)
    assert text.startswith("safe for this audit set at target 60%")
    assert text.endswith(
        "; the privacy audit from below exceeds no claim (10 lower bounds, jointly at 95%; "
        "closest mallory: flip: epsilon >= 0.021 against the claimed 0.05)"
    )
    broken = {**clean, "defects": 2, "verdict": "DEFECT: 2 lower bound(s) above the claims"}
    text = safety(52.0, CEILINGS, 60.0, audit=broken)
    assert text.startswith("not proven at target 60%: strongest attack 52.0%; ceilings: policy")
    assert "DEFECT: the privacy audit from below found 2 lower bound(s)" in text
    assert "safe" not in text
    nothing = {**clean, "closest": None, "verdict": "nothing to audit"}
    assert safety(52.0, CEILINGS, None, audit=nothing).endswith(
        "; the privacy audit from below: nothing to audit"
    )
