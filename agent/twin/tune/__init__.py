"""``roce-agent tune``: ECN x DCQCN x QPs per connection searched jointly in the twin, per speed.

Every candidate is the fabric's own intent with the candidate's values put where a profile
override puts them, planned, rule-checked and simulated, so a row of the search is what
``roce-agent twin`` shows for the fabric with that override.  One concern per module:

* :mod:`~agent.twin.tune.search` -- the search itself: ``tune``, the method (full grid or
  successive halving), the load points, widening at the edges;
* :mod:`~agent.twin.tune.options` -- what a tune may be asked: defaults, bounds, checks;
* :mod:`~agent.twin.tune.objectives` -- what is optimised, and the hard constraints;
* :mod:`~agent.twin.tune.space` -- the searched axes of one speed, their levels, candidates;
* :mod:`~agent.twin.tune.fabric` -- today's setting at a speed, and a candidate put into the
  intent;
* :mod:`~agent.twin.tune.runs` -- one run of a candidate (a job) and what it measures;
* :mod:`~agent.twin.tune.runners` -- who runs a batch of jobs (here, a process pool, Dask);
* :mod:`~agent.twin.tune.judge` -- the constraints a candidate misses, the ranking;
* :mod:`~agent.twin.tune.decision` -- what a speed decides (a change, no change, none) and why:
  the one record every rendering of the result comes from;
* :mod:`~agent.twin.tune.explain` -- the decision and its neighbours in words;
* :mod:`~agent.twin.tune.notes` -- what a speed's search notes: its edges, widening, a pause
  threshold it moves (records; their words are their ``str()``);
* :mod:`~agent.twin.tune.results` -- the result records and their JSON;
* :mod:`~agent.twin.tune.text` -- how numbers and lists are written.

This package re-exports nothing: importing ``agent.twin.tune`` costs nothing on the twin's path.
"""
