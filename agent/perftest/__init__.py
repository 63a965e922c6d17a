"""perftest line-rate acceptance (``roce-agent probe perftest``).

- :mod:`agent.perftest.output`: parse a perftest BW run (stdout, ``--out_json`` old and new).
- :mod:`agent.perftest.gid`: the RoCE v2 GID index for ``-x`` and the ``--tclass`` byte.
- :mod:`agent.perftest.command`: server and client argv.
- :mod:`agent.perftest.verdict`: the acceptance rules PT001-PT007 and the verdict.
- :mod:`agent.perftest.report`: Markdown, JUnit XML and table rows.

- :mod:`agent.perftest.worker`: the host side (worker role ``perftest``).
- :mod:`agent.perftest.scenario`: runs pairwise, incast and bidirectional over the fabric.

Import the modules themselves: the package re-exports nothing, so that the worker on a host
imports only what it uses (a Python start in a TCG lab VM costs seconds per module tree).
"""
