"""``lab.topology``: a containerlab topology (``*.clab.yml``) as the netns runtime builds it.

* ``model``   -- the validated topology: nodes, links, credentials, the lab's defaults;
* ``loader``  -- ``load_topology``: the file read, checked in passes, into the model;
* ``schema``  -- the file's shape (containerlab's schema) and the lab's ``roce.lab/`` labels;
* ``checker`` -- the problems found, each located (``FILE:LINE:COL: field: message``);
* ``layers``  -- where a node's settings come from (defaults < kind < group < node) and the
  lab-wide settings;
* ``nodes``   -- each node's kind, role and lab parameters;
* ``links``   -- each link's endpoints, and both ends agreeing;
* ``units``   -- speeds, sizes and MTUs as labels write them.
"""
