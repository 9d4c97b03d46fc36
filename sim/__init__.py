"""The simulation layer of biasleak: data, world assembly, evaluation and the command line.

Today it holds the bundled data sets (:mod:`biasleak.sim.datasets`) and the ``biasleak`` command
line (:mod:`biasleak.sim.cli`); the model developers train without the protected attribute is
theirs (:mod:`biasleak.agents.models`). It may import :mod:`biasleak.agents` and
:mod:`biasleak.mechanisms`; nothing imports it from below.
"""
