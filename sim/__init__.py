"""The simulation layer of biasleak: data, world assembly, evaluation and the command line.

It holds the bundled data sets (:mod:`biasleak.sim.datasets`), scenario files
(:mod:`biasleak.sim.scenario`), the world runner (:mod:`biasleak.sim.world`), run logs
(:mod:`biasleak.sim.runlog`), evaluation against the ground truth (:mod:`biasleak.sim.evaluation`),
tables (:mod:`biasleak.sim.tables`) and the ``biasleak`` command line (:mod:`biasleak.sim.cli`).
It may import :mod:`biasleak.agents` and :mod:`biasleak.mechanisms`; nothing imports it from below.
"""
