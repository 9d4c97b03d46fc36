"""The agents of the biasleak simulation (SimPy processes and the pure logic they wrap).

Available now: what a developer may see (:mod:`biasleak.agents.public`) and the models a developer
trains without the protected attribute (:mod:`biasleak.agents.models`).

This layer will hold the message protocol between agents, the developer process with its
strategies (honest model selection and the Attribute-Reveal attacks, with their decoders), the
compliance process around a policy pipeline, and the external auditor. It may import
:mod:`biasleak.mechanisms` but never :mod:`biasleak.sim`, and no object reachable from a developer
holds the protected attribute.
"""
