"""The fabric twin: a discrete-event simulation of the intent's fabric on a virtual clock
(coming) and an independent fluid model of DCQCN to cross-check it.

:mod:`agent.twin.fluid` integrates the delay differential equations of Zhu et al., "ECN or
Delay: Lessons Learnt from Analysis of DCQCN and TIMELY" (CoNEXT 2016, section 3) for N flows
through one ECN-marking bottleneck. It shares no code with the packet-level algorithms in
:mod:`lossless`, so that an agreement between the two means something.
"""
