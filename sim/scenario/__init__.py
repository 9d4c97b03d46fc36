"""Scenario files: one YAML file per scenario, validated before anything runs.

A scenario names the data, the developers and their strategies, the compliance team's metrics and
policy stages, the optional external auditor, the red team, the horizon and the seed::

    name: quickstart
    seed: 42
    data: {dataset: adult, protected: race, n: 1000}
    developers:
      - id: mallory
        organization: acme
        strategy: {kind: compressed_sensing, queries: 400, perturbation: 0.1, batch: 50}
    compliance:
      metrics: [sp, abs_sp, eo, abs_eo]
      policy:
        - {kind: budget, epsilon: 10.0, scope: organization}
        - {kind: noise, mechanism: attribute_conceal, epsilon: 0.05}

:func:`load_scenario` reads such a file into a :class:`Scenario`, or raises
:class:`ScenarioError` with one readable line per problem. On the way:

- the YAML is read with YAML 1.2 rules (:mod:`.loading`): ``1e3`` is the number 1000.0,
  ``no``/``yes``/``on``/``off`` are texts (only ``true``/``false`` are booleans), ``017`` is 17,
  ``.inf`` is infinity, and a key written twice is an error naming both lines;
- ``--set key.path=value`` overrides change a copy of the data before validation
  (:func:`apply_overrides`), with their values read by the same rules;
- every mapping forbids unknown keys and every number must be a number (:mod:`.base`); strategies,
  policy stages and data sources are discriminated unions on ``kind``, ``kind`` and ``dataset``,
  built from the registries in :mod:`biasleak.agents` and here (:mod:`.models`, :mod:`.policy`,
  :mod:`.data`);
- a problem names the file and line, the key path as the user wrote it, the value, what is
  allowed, and "did you mean" for a near-miss name (:mod:`.errors`).

A validated scenario has a hash that ignores layout and tracks values (:func:`scenario_hash`, in
every run log's header), and the models export the JSON Schema of scenario files (:func:`schema`,
committed as ``scenarios/schema.json``).

Two more checks run before anything runs. The optional ``limits:`` mapping caps the size of the
world (events and log size per run, auditor visits, identities, candidates, grid runs), with
defaults that every shipped scenario keeps (:mod:`.limits`); every point of a ``grid:`` is
validated as a scenario, its problems reported at the grid entry's line (:mod:`.grid`). And
:func:`check_scenario` also loads the data every run will draw (CSV cells, the group sizes of
each audit-set draw), so a problem there is a line of the scenario file too (:mod:`.prepare`).

Modules: :mod:`.base` (strict models), :mod:`.data` (data sources), :mod:`.policy` (the compliance
policy), :mod:`.limits` (caps), :mod:`.models` (the whole scenario, hash, schema),
:mod:`.loading` (YAML reading), :mod:`.overrides` (``--set``), :mod:`.errors` (readable
problems), :mod:`.grid` (grid points), :mod:`.parsing` (file to scenario), :mod:`.prepare` (the
data a run draws). Everything a caller needs is importable from this package.
"""

from __future__ import annotations

from biasleak.sim.scenario.base import Strict
from biasleak.sim.scenario.data import (
    ADULT_SIZES,
    GERMAN_SIZE,
    AdultData,
    CsvData,
    DataConfig,
    GermanData,
    SyntheticData,
)
from biasleak.sim.scenario.errors import CANNOT_READ, NOT_A_MAPPING, NOT_YAML, ScenarioError
from biasleak.sim.scenario.grid import GridPoint, grid_points
from biasleak.sim.scenario.limits import Limits
from biasleak.sim.scenario.loading import Document, read_document, read_yaml
from biasleak.sim.scenario.models import (
    ATTACK_KINDS,
    AuditorConfig,
    DeveloperConfig,
    ModelConfig,
    RedTeamConfig,
    Scenario,
    StrategyConfig,
    scenario_hash,
    schema,
)
from biasleak.sim.scenario.overrides import apply_overrides
from biasleak.sim.scenario.parsing import Parsed, load_scenario, parse_scenario, read_scenario
from biasleak.sim.scenario.policy import STAGES, ComplianceConfig, Stage
from biasleak.sim.scenario.prepare import check_data, check_scenario

__all__ = [
    "ADULT_SIZES",
    "ATTACK_KINDS",
    "CANNOT_READ",
    "GERMAN_SIZE",
    "NOT_A_MAPPING",
    "NOT_YAML",
    "STAGES",
    "AdultData",
    "AuditorConfig",
    "ComplianceConfig",
    "CsvData",
    "DataConfig",
    "DeveloperConfig",
    "Document",
    "GermanData",
    "GridPoint",
    "Limits",
    "ModelConfig",
    "Parsed",
    "RedTeamConfig",
    "Scenario",
    "ScenarioError",
    "Stage",
    "StrategyConfig",
    "Strict",
    "SyntheticData",
    "apply_overrides",
    "check_data",
    "check_scenario",
    "grid_points",
    "load_scenario",
    "parse_scenario",
    "read_document",
    "read_scenario",
    "read_yaml",
    "scenario_hash",
    "schema",
]
