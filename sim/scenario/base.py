"""The one rule every part of a scenario file follows: strict mappings.

Every mapping of a scenario file is a pydantic model derived from :class:`Strict`. Two settings
make a typo or a wrong type an error instead of a silent surprise:

- ``extra="forbid"``: a key the model does not know (``modle:``, ``decodr:``) is an error, which the
  error translation turns into "unknown key ... did you mean ...";
- ``strict=True``: numbers must be written as numbers and text as text. ``true`` is not the number
  1.0, the text ``"30"`` is not the number 30, and a float such as ``400.5`` (or ``1e3``, which
  YAML 1.2 reads as the float 1000.0) is not an integer. A field that wants to accept the usual
  spellings of a flag relaxes this for itself with ``Field(..., strict=False)``.

The data sources (:mod:`.data`), the policy stages (:mod:`.policy`) and the rest of the scenario
(:mod:`.models`) all build on this base, so the rule holds everywhere in the file.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    """Unknown keys are errors; numbers must be numbers (no true -> 1.0, no "30" -> 30)."""

    model_config = ConfigDict(extra="forbid", strict=True)
