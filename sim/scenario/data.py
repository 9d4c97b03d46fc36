"""Where the audit data comes from: the ``data:`` mapping of a scenario file.

A scenario's audit set S = (X, Y, A) is drawn from one of four sources, told apart by the key
``dataset`` (a discriminated union, so an error names the keys of the source the user chose):

- ``adult``: UCI Adult, with race or sex as the protected attribute, drawn from the test split or
  from the whole population, optionally without the rows that have missing values;
- ``german``: UCI Statlog German Credit (1,000 people), with sex as the protected attribute;
- ``synthetic``: data from the generative model documented in :mod:`biasleak.sim.datasets`;
- ``csv``: a user's own CSV file, with the columns that hold the label and the attribute, and
  optionally the values of the disadvantaged group (``disadvantaged: [B, C]``: any other value is
  then an error, not a member of group 0) and what to do with empty feature cells
  (``missing: error`` or ``drop``).

The facts about the shipped data sets that validation needs live here too: how many people are
eligible for each choice of protected attribute, split and missing-value rule
(:data:`ADULT_SIZES`), so that asking for a larger audit set than exists is an error in the file,
not a failure in the middle of a run. Every audit set needs two people of each group at least;
for synthetic data the file fixes the group sizes, so validation checks them; for the other
sources the sizes depend on the draw, which :mod:`.prepare` makes before any run starts.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from biasleak.sim.datasets._csv import MISSING_RULES
from biasleak.sim.datasets._types import MIN_GROUP
from biasleak.sim.scenario.base import Strict

__all__ = [
    "ADULT_SIZES",
    "GERMAN_SIZE",
    "AdultData",
    "CsvData",
    "DataConfig",
    "GermanData",
    "SyntheticData",
]

ADULT_SIZES = {  # (protected, split, drop_missing) -> eligible people
    ("race", "test", False): 15507,
    ("race", "test", True): 14381,
    ("race", "all", False): 46447,
    ("race", "all", True): 43131,
    ("sex", "test", False): 16281,
    ("sex", "test", True): 15060,
    ("sex", "all", False): 48842,
    ("sex", "all", True): 45222,
}
"""People eligible for an Adult audit set, by (protected attribute, split, drop_missing)."""
GERMAN_SIZE = 1000
"""People in the German Credit data set."""


class AdultData(Strict):
    """UCI Adult; the audit set is drawn from the test split."""

    dataset: Literal["adult"]
    protected: Literal["race", "sex"] = "race"
    n: int | None = Field(None, ge=3, description="audit set size (default: every eligible person)")
    seed: int | None = Field(None, ge=0, description="audit draw seed (default: the run seed)")
    split: Literal["test", "all"] = Field(
        "test", description="draw the audit set from the test split, or from the whole population"
    )
    drop_missing: bool = Field(False, strict=False, description="drop rows with missing values")

    @model_validator(mode="after")
    def _size(self) -> AdultData:
        available = ADULT_SIZES[(self.protected, self.split, self.drop_missing)]
        if self.n is not None and self.n > available:
            where = "test split" if self.split == "test" else "data set"
            raise ValueError(
                f"n = {self.n} is larger than the data set: the Adult {where} has {available} "
                f"people for protected={self.protected!r}"
                + (" without missing values" if self.drop_missing else "")
            )
        return self


class GermanData(Strict):
    """UCI Statlog German Credit; sex as the protected attribute."""

    dataset: Literal["german"]
    n: int | None = Field(None, ge=3, le=GERMAN_SIZE, description="audit set size (max 1000)")
    seed: int | None = Field(None, ge=0)


class SyntheticData(Strict):
    """Synthetic data (generative model documented in biasleak.sim.datasets)."""

    dataset: Literal["synthetic"]
    n: int = Field(ge=3, le=10_000_000, description="audit set size (at most 10 million)")
    minority: int = Field(ge=1, description="N0, the size of the group with a = 0")
    features: int = Field(5, ge=1)
    score: Literal["normal", "uniform"] = "normal"
    group_shift: float = Field(0.0, allow_inf_nan=False)
    train_size: int | None = Field(None, ge=10)
    seed: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _minority(self) -> SyntheticData:
        if not self.minority < self.n:
            raise ValueError(f"minority = {self.minority} must be smaller than n = {self.n}")
        least = MIN_GROUP
        if self.minority < least or self.n - self.minority < least:
            raise ValueError(
                f"each group needs at least {least} people: minority = {self.minority} and "
                f"n - minority = {self.n - self.minority}; make data.n larger or change minority"
            )
        return self


class CsvData(Strict):
    """A user's CSV file."""

    dataset: Literal["csv"]
    path: str
    label: str
    protected: str
    advantaged: str
    disadvantaged: list[str] | None = Field(
        None,
        min_length=1,
        exclude_if=lambda values: values is None,
        description="the values of the disadvantaged group (default: every value other than "
        "advantaged); with it, any other value is an error",
    )
    positive: str | None = None
    missing: Literal[MISSING_RULES] = Field(  # type: ignore[valid-type]
        "error",
        exclude_if=lambda rule: rule == "error",
        description="an empty feature cell: 'error' (the default) or 'drop' its row",
    )
    n: int | None = Field(None, ge=3)
    audit_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    seed: int | None = Field(None, ge=0)

    @model_validator(mode="after")
    def _groups(self) -> CsvData:
        if self.label == self.protected:
            raise ValueError(f"label and protected name the same column {self.label!r}")
        values = self.disadvantaged or []
        if self.advantaged in values:
            raise ValueError(
                f"disadvantaged lists the advantaged value {self.advantaged!r}; a value is in "
                "one group only"
            )
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ValueError(f"disadvantaged lists a value twice: {repeated}")
        return self


DataConfig = Annotated[
    AdultData | GermanData | SyntheticData | CsvData, Field(discriminator="dataset")
]
"""The ``data:`` mapping: one of the sources, chosen by its ``dataset`` key."""
