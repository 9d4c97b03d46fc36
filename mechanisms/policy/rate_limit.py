"""Rate limits: a token bucket per identity or organisation, in models per simulated day.

A bucket holds ``per_day`` tokens and refills continuously at ``per_day / 24`` tokens per
simulated hour; a query needs one token per model, a service request one token. Every limit is
checked before any is spent, and tokens are spent only by answered requests. A refused request
carries ``retry_after``: the time at which every limit it hit has refilled enough. A query
larger than a bucket can never fit and is refused without a retry time (split it). A rate limit
meters what developers ask for; a publication is the compliance team's own release, which no
developer asks for, so rate limits do not apply to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final, Literal

from pydantic import Field

from biasleak.mechanisms.policy._stage import Pending, Refused, StageConfig

__all__ = ["HOURS_PER_DAY", "RateLimit"]

HOURS_PER_DAY: Final = 24.0
NEVER_FITS: Final = (
    "a query of {m} models can never fit a limit of {per_day} models per day per {scope}; split it"
)


class RateLimit(StageConfig):
    """At most ``per_day`` models per simulated day per identity or organisation."""

    ORDER: ClassVar[int] = 30
    KINDS: ClassVar[tuple[str, ...]] = ("query", "service")
    REPEATABLE: ClassVar[bool] = True
    REFUSALS: ClassVar[dict[str, str]] = {"rate_limited": "a rate limit has too few tokens left"}

    kind: Literal["rate_limit"] = "rate_limit"
    per_day: int = Field(ge=1, description="models per simulated day")
    """Bucket capacity and refill per day, in models."""
    scope: Literal["identity", "organization"] = "identity"
    """Who shares a bucket."""

    def key(self, q: Pending) -> str:
        owner = q.request.identity if self.scope == "identity" else q.request.organization
        return f"{self.scope}:{owner}:{self.per_day}"

    def tokens_now(self, q: Pending, key: str) -> float:
        """Tokens in the bucket ``key`` at ``q.now`` (after the refill since its last use)."""
        tokens, last = q.state.tokens.get(key, (float(self.per_day), q.now))
        rate = self.per_day / HOURS_PER_DAY
        return min(float(self.per_day), tokens + rate * max(q.now - last, 0.0))

    @classmethod
    def check(cls, stages: Sequence[RateLimit], q: Pending) -> Refused | None:
        m = q.models
        for limit in stages:
            if m > limit.per_day:
                detail = NEVER_FITS.format(m=m, per_day=limit.per_day, scope=limit.scope)
                return Refused("rate_limited", detail)
        buckets, short = [], []
        for limit in stages:
            key = limit.key(q)
            tokens = limit.tokens_now(q, key)
            if tokens + 1e-9 < m:
                wait = (m - tokens) / (limit.per_day / HOURS_PER_DAY)
                what = f"{limit.per_day} models per day per {limit.scope}; {tokens:.2f} left now"
                short.append((q.now + wait, what))
            buckets.append((key, tokens))
        if short:  # retry when every limit has refilled enough
            retry, _ = max(short)
            return Refused("rate_limited", "; ".join(d for _, d in short), retry)
        q.scratch["rate_limit"] = buckets
        return None

    @classmethod
    def commit(cls, stages: Sequence[RateLimit], q: Pending) -> None:
        m = q.models
        for key, tokens in q.scratch["rate_limit"]:
            q.state.tokens[key] = (tokens - m, q.now)
