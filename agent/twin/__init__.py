"""The fabric twin: a discrete-event simulation of the intent's fabric on a virtual clock, and
an independent fluid model of DCQCN to cross-check it.

- :mod:`agent.twin.network` builds the simulated network from the intent and its plan,
  :mod:`agent.twin.engine` runs it in integer picoseconds (:class:`lossless.clock.TickClock`)
  with the shared model (:mod:`lossless`) deciding every mark, pause, drop and rate cut,
  :mod:`agent.twin.workloads` sets up traffic, :mod:`agent.twin.results` reports it and
  :mod:`agent.twin.plot` draws it.
- :mod:`agent.twin.fluid` integrates the delay differential equations of Zhu et al., "ECN or
  Delay: Lessons Learnt from Analysis of DCQCN and TIMELY" (CoNEXT 2016, section 3) for N
  flows through one ECN-marking bottleneck. It shares no code with :mod:`lossless`, so an
  agreement between the two means something.
"""

# Before the engine is imported: source or compiled, decided once (lossless.compiled).
import lossless.compiled  # noqa: F401 -- imported for its effect: the compiled-or-source decision
