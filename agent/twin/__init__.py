"""The fabric twin: a discrete-event simulation of the intent's fabric on a virtual clock, and
an independent fluid model of DCQCN to cross-check it.

- :mod:`agent.twin.network` builds the simulated network from the intent and its plan,
  :mod:`agent.twin.engine` runs it in integer picoseconds (:class:`lossless.clock.TickClock`)
  with the shared model (:mod:`lossless`) deciding every mark, pause, drop and rate cut,
  :mod:`agent.twin.workloads` sets up traffic, :mod:`agent.twin.results` reports it and
  :mod:`agent.twin.plot` draws it.  The elements the engine runs have modules of their own:
  :mod:`~agent.twin.frames`, :mod:`~agent.twin.flows`, :mod:`~agent.twin.events`,
  :mod:`~agent.twin.nic`, :mod:`~agent.twin.switch`, :mod:`~agent.twin.samples`, built and
  wired for a run by :mod:`~agent.twin.wiring`.
- :mod:`agent.twin.collectives` runs NCCL's collectives on the engine;
  :mod:`agent.twin.verdicts` says what a run means.
- :mod:`agent.twin.tune` is ``roce-agent tune``'s search (ECN x DCQCN x QPs in the twin), and
  :mod:`agent.twin.cluster` runs its jobs on a Dask cluster.
- :mod:`agent.twin.fluid` integrates the delay differential equations of Zhu et al., "ECN or
  Delay: Lessons Learnt from Analysis of DCQCN and TIMELY" (CoNEXT 2016, section 3) for N
  flows through one ECN-marking bottleneck. It shares no code with :mod:`lossless`, so an
  agreement between the two means something.
"""

# Before the engine is imported: source or compiled, decided once (lossless.compiled).
import lossless.compiled  # noqa: F401 -- imported for its effect: the compiled-or-source decision
