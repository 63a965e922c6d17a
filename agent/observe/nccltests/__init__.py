"""NCCL acceptance with nccl-tests (``roce-agent probe nccl``).

- :mod:`agent.observe.nccltests.output`: parse nccl-tests' text output (its table, footer,
  rank list and failure lines), every layout since 2019.
- :mod:`agent.observe.nccltests.command`: the ``mpirun`` command line that runs one test over
  the GPU hosts with the job environment of ``roce-agent nccl``.
- :mod:`agent.observe.nccltests.verdict`: the acceptance rules NT001-NT004 and the verdict.
- :mod:`agent.observe.nccltests.run`: the glue: which hosts have GPUs, the environment, the
  counters before and after, the run over SSH, the verdict.

The rest of the agent imports the modules themselves: the package re-exports nothing.
"""
