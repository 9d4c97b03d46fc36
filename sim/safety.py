"""The verdict on a policy: the strongest attack, the three ceilings, and what they prove.

A compliance officer asks "is this policy safe, at my risk target?". The answer has three
strengths, from the strongest statement to the weakest, each a theorem about a different
attacker (:mod:`biasleak.mechanisms.ceiling`):

- **safe by the policy's guarantee**: the policy ceiling is at or below the target; no attacker
  that knows the group sizes exceeds it in expected balanced accuracy, on any audit set of this
  size;
- **safe for this audit set**: the audit-set ceiling is at or below it: whatever models an
  attacker sends, this many answers on this audit set cannot give more;
- **safe with these answers**: the answers ceiling is at or below it: exactly these answers
  cannot give more (another attacker, sending other models, might get up to the audit-set
  ceiling).

Otherwise the policy is **unsafe** when the strongest attack already passed the target, and
**not proven** when it did not but no ceiling rules out an attacker that does.

These three take the public data to say nothing about the attribute beyond the group sizes. The
verdict adds the statement that holds whatever an attacker knows besides: the answers add at
most ``person ceiling - 50`` points to what that knowledge gives (the ceiling module's side
information theorem), and the most exposed person's bound itself. Ceilings bound an
expected balanced accuracy; one run's measured leakage scatters around its expectation, so an
attack a point above a ceiling is noise, not a contradiction. The audit-set and answers ceilings
are facts about the audit set for the evaluator: a verdict that rests on them must not be shown
to developers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CEILING_KEYS",
    "LEVEL_NAMES",
    "audit_clause",
    "ceilings_of",
    "person_bound",
    "policy_ceilings",
    "safety",
    "worst_ceilings",
]

CEILING_KEYS: Final = ("leakage_ceiling", "audit_set_ceiling", "answers_ceiling")
"""Summary keys of the policy, audit-set and answers ceilings (percent)."""

LEVEL_NAMES: Final = {
    "leakage_ceiling": "policy",
    "audit_set_ceiling": "audit set",
    "answers_ceiling": "answers",
}
"""How the tables name each ceiling."""


def _num(value: Any) -> float | None:
    if value is None or isinstance(value, str):
        return None
    x = float(value)
    return None if math.isnan(x) else x


def ceilings_of(record: Mapping[str, Any]) -> dict[str, float | None]:
    """The three ceilings of a developer's or organisation's summary (or an attack record)."""
    return {key: _num(record.get(key)) for key in CEILING_KEYS}


def worst_ceilings(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """A run's ceilings: :func:`policy_ceilings` over its organisations and the developers
    without one (any party could be the attacker)."""
    parties = [*(summary.get("organizations") or {}).values()]
    parties += [
        d for d in (summary.get("developers") or {}).values() if d.get("organization") is None
    ]
    return policy_ceilings(parties)


def policy_ceilings(records: list[Mapping[str, Any]]) -> dict[str, float | None]:
    """A policy's ceilings from its attacks' records (a red team's, or a scenario's attackers).

    Each attack's ceilings bound only attackers with its own answers, so each level is the
    largest over the attacks without side information; the attacks that start from a proxy model
    give ``proxy_ceiling``, their tightest level (the bound for an attacker with that side
    information), and ``person_ceiling`` is the largest over all of them. A level some attack
    does not know is unknown (None).
    """
    live = [r for r in records if r.get("applicable", True)]
    plain = [r for r in live if not _is_proxy(r)]
    proxies = [_tightest(r) for r in live if _is_proxy(r)]
    out = {key: _largest([r.get(key) for r in plain]) for key in CEILING_KEYS}
    out["person_ceiling"] = _largest([person_bound(r) for r in live])
    out["proxy_ceiling"] = _largest(proxies) if proxies else None
    scored = [r for r in live if _num(r.get("leakage")) is not None]
    if scored:  # whether the strongest attack's leakage rests on side information
        top = max(scored, key=lambda r: float(r["leakage"]))
        out["strongest_side_information"] = _is_proxy(top)  # type: ignore[assignment]
    return out


def _is_proxy(record: Mapping[str, Any]) -> bool:
    kind = record.get("ceiling_kind")
    if kind is not None:
        return bool(kind == "proxy_prior")
    from biasleak.agents.strategies import PROXY_KINDS

    return record.get("kind") in PROXY_KINDS


def _tightest(record: Mapping[str, Any]) -> float | None:
    for key in ("answers_ceiling", "audit_set_ceiling", "leakage_ceiling"):
        value = _num(record.get(key))
        if value is not None:
            return value
    return None


def _largest(values: list[Any]) -> float | None:
    if not values or any(v is None for v in values):
        return None
    return max(float(v) for v in values)


def person_bound(record: Mapping[str, Any]) -> float | None:
    """The most exposed person's ceiling of a summary record, at the tightest level known."""
    person = record.get("person_ceiling")
    if isinstance(person, int | float):
        return float(person)
    for level in ("answers", "audit_set", "policy"):
        value = _num((person or {}).get(level))
        if value is not None:
            return value
    return None


def safety(
    leakage: float | None,
    ceilings: Mapping[str, float | None],
    target: float | None,
    *,
    public: float | None = None,
    audit: Mapping[str, Any] | None = None,
) -> str:
    """One sentence: what the strongest attack and the ceilings prove at ``target`` (percent).

    ``public`` is what the public data alone reveal (the proxy baseline), when known; ``audit``
    the privacy audit's headline (:meth:`biasleak.sim.privacy_audit.AuditReport.headline`), when
    one ran: its clause closes the sentence. Without a target: the strongest attack and the three
    ceilings, plainly.
    """
    if audit is not None and audit.get("defects"):
        # a claim the audit refutes proves nothing: no level may be stated as safe
        attack = "no attack estimated" if leakage is None else f"strongest attack {leakage:.1f}%"
        shown = ", ".join(f"{LEVEL_NAMES[k]} {_pct(ceilings.get(k))}" for k in CEILING_KEYS)
        at = "" if target is None else f" at target {float(target):g}%"
        return f"not proven{at}: {attack}; ceilings: {shown}{audit_clause(audit)}"
    return _sentence(leakage, ceilings, target, public) + audit_clause(audit)


def audit_clause(audit: Mapping[str, Any] | None) -> str:
    """``; the privacy audit from below ...``: what the audit found, or ``""`` without one."""
    if audit is None:
        return ""
    closest = audit.get("closest")
    if closest is None:
        return f"; the privacy audit from below: {audit['verdict']}"
    found = (
        f"{closest['label']}: epsilon >= {closest['epsilon_lower']:.3g} against the claimed "
        f"{closest['claimed_epsilon']:.3g}"
    )
    if audit.get("defects"):
        return (
            f"; DEFECT: the privacy audit from below found {audit['defects']} lower bound(s) "
            f"above the ceilings' claims (closest {found}; `biasleak audit` lists them): these "
            "ceilings are not proven"
        )
    return (
        f"; the privacy audit from below exceeds no claim ({audit['bounds']} lower bounds, "
        f"jointly at {100 * float(audit['confidence']):g}%; closest {found})"
    )


def _sentence(
    leakage: float | None,
    ceilings: Mapping[str, Any],
    target: float | None,
    public: float | None,
) -> str:
    """:func:`safety` without the audit clause."""
    policy, audit, answers = (ceilings.get(k) for k in CEILING_KEYS)
    shown = ", ".join(f"{LEVEL_NAMES[k]} {_pct(ceilings.get(k))}" for k in CEILING_KEYS)
    attack = "no attack estimated" if leakage is None else f"strongest attack {leakage:.1f}%"
    reached = (
        "no attack was estimated"
        if leakage is None
        else f"the strongest attack reached {leakage:.1f}%"
    )
    if leakage is not None and ceilings.get("strongest_side_information"):
        reached += " (starting from a proxy model's side information)"
    known = "" if public is None else f"; the public data alone: {public:.1f}% (a proxy model)"
    if target is None:
        return f"{attack}; ceilings: {shown}{known}"
    t = float(target)
    person = _num(ceilings.get("person_ceiling"))
    gain = ""
    if person is not None:
        added = person - 50.0
        with_public = (
            ""
            if public is None
            else f" (with what a proxy model knows from public data, {public:.1f}%: at most "
            f"{min(100.0, public + added):.1f}%)"
        )
        gain = (
            f"; whatever an attacker knows besides, these answers add at most {added:.1f} points"
            f"{with_public}, and the most exposed person is guessed right at most {person:.1f}% "
            "of the time by an attacker who knows everyone else's attribute"
        )
    proxy = _num(ceilings.get("proxy_ceiling"))
    if proxy is not None:
        gain += (
            f"; an attacker that starts from a proxy model trained on public data cannot expect "
            f"more than {proxy:.1f}% with its answers"
        )
    if leakage is not None and leakage > t:
        return f"unsafe at target {t:g}%: {reached}, above it; ceilings: {shown}{known}{gain}"
    if public is not None and public > t:
        return (
            f"no policy can be safe at target {t:g}%: the public data alone reveal {public:.1f}% "
            f"(a proxy model trained on an external sample), and the ceilings bound what "
            f"the answers reveal to an attacker without side information ({shown}); {reached}"
            f"{gain}"
        )
    return _levels(policy, audit, answers, reached, shown, t) + gain


def _levels(
    policy: float | None,
    audit: float | None,
    answers: float | None,
    reached: str,
    shown: str,
    t: float,
) -> str:
    """The strongest of the three no-side-information statements that meets the target."""
    if policy is not None and policy <= t:
        return (
            f"safe by the policy's guarantee at target {t:g}%: no attacker that knows the group "
            f"sizes can exceed {policy:.1f}% on any audit set of this size, without side "
            f"information; {reached}"
        )
    if audit is not None and audit <= t:
        return (
            f"safe for this audit set at target {t:g}%: no attacker without side information can "
            f"exceed {audit:.1f}% with this many answers on this audit set; the policy's own "
            f"guarantee allows {_pct(policy)}; {reached}"
        )
    if answers is not None and answers <= t:
        return (
            f"safe with these answers at target {t:g}%: no attacker without side information "
            f"can exceed {answers:.1f}% with exactly these answers; other models could reach up "
            f"to {_pct(audit)} on this audit set and the policy's guarantee allows "
            f"{_pct(policy)}; {reached}"
        )
    return (
        f"not proven at target {t:g}%: {reached}, below it, but no ceiling rules out an "
        f"attacker above it; ceilings: {shown}"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"
