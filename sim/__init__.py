"""The simulation layer of biasleak: data, world assembly, evaluation, reports and the command line.

It holds the bundled data sets (:mod:`biasleak.sim.datasets`), scenario files
(:mod:`biasleak.sim.scenario`), the world runner (:mod:`biasleak.sim.world`), run logs
(:mod:`biasleak.sim.runlog`), evaluation against the ground truth (:mod:`biasleak.sim.evaluation`),
typed run summaries (:mod:`biasleak.sim.summary`), the red team (:mod:`biasleak.sim.redteam`),
sweeps (:mod:`biasleak.sim.sweep`, pools in :mod:`biasleak.sim.executors`), tables and reports
(:mod:`biasleak.sim.report`), the demo (:mod:`biasleak.sim.demo`) and the ``biasleak`` command
line (:mod:`biasleak.sim.cli`, commands in :mod:`biasleak.sim.cli.commands`). It may import
:mod:`biasleak.agents` and :mod:`biasleak.mechanisms`; nothing imports it from below.
"""
