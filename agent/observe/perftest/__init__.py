"""perftest line-rate acceptance (``roce-agent probe perftest``).

- :mod:`agent.observe.perftest.output`: parse a perftest BW run (stdout, ``--out_json`` old and
new).
- :mod:`agent.observe.perftest.gid`: the RoCE v2 GID index for ``-x`` and the ``--tclass`` byte.
- :mod:`agent.observe.perftest.command`: server and client argv.
- :mod:`agent.observe.perftest.acceptance`: the verdict of a run, by the acceptance rules:
  :mod:`~agent.observe.perftest.rate_rules` (PT001-PT003) and
  :mod:`~agent.observe.perftest.counter_rules` (PT004-PT007) on the base of
  :mod:`~agent.observe.perftest.rule`, over :mod:`~agent.observe.perftest.inputs`, making the
  records of :mod:`~agent.observe.perftest.verdict`.
- :mod:`agent.observe.perftest.report`: Markdown, JUnit XML and table rows.

- :mod:`agent.observe.perftest.worker`: the host side (worker role ``perftest``).
- :mod:`agent.observe.perftest.scenario`: runs pairwise, incast and bidirectional over the fabric.

Import the modules themselves: the package re-exports nothing, so that the worker on a host
imports only what it uses (a Python start in a TCG lab VM costs seconds per module tree).
"""
