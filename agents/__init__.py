"""The agents of the biasleak simulation (SimPy processes and the pure logic they wrap).

- :mod:`~biasleak.agents.messages`: the protocol - queries, answers, refusals, alerts, notices,
  and mailboxes with a delivery latency;
- :mod:`~biasleak.agents.developer`: the developer process around a strategy from
  :mod:`~biasleak.agents.strategies` (honest selection, compressed sensing, and their decoders);
- :mod:`~biasleak.agents.compliance`: the compliance process around a policy from
  :mod:`biasleak.mechanisms.policy` (the only agent holding the protected attribute);
- :mod:`~biasleak.agents.auditor`: the external auditor and its detectors;
- :mod:`~biasleak.agents.public` and :mod:`~biasleak.agents.models`: what a developer may see,
  and the models it trains without the protected attribute.

This layer will hold the message protocol between agents, the developer process with its
strategies (honest model selection and the Attribute-Reveal attacks, with their decoders), the
compliance process around a policy pipeline, and the external auditor. It may import
:mod:`biasleak.mechanisms` but never :mod:`biasleak.sim`, and no object reachable from a developer
holds the protected attribute.
"""
