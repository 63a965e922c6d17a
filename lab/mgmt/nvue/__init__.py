"""NVIDIA Cumulus Linux 5.x (NVUE) personality of the lab switch's management plane.

A Cumulus Linux shell whose ``nv`` command edits NVUE revisions of a configuration tree
limited to the QoS object model; every applied revision is translated into the shared model
and installed through :meth:`SwitchManager.install`, so it reaches the data plane, and ``nv
show`` reads the data plane's counters. See ``docs/lab-nvue.md`` for what is emulated, with
sources. Modules (the shape every ``lab/mgmt/<nos>/`` package has):

* ``personality`` -- the switch-wide state (revisions, the confirm timer) and new terminals;
* ``state``       -- what the shell and ``nv`` need of it (a protocol);
* ``shell``       -- the Cumulus login shell (:mod:`lab.mgmt.linux_shell` with ``nv``);
* ``commands``    -- ``nv set|unset|config|show``;
* ``shows``       -- ``nv show`` output, from the tree and the data plane's counters;
* ``translate``   -- an NVUE tree -> the shared model (:mod:`lab.mgmt.model`);
* ``schema``, ``tree``, ``revisions``, ``errors`` -- the object model, tree edits and diffs,
  pending / applied / detached revisions, NVUE's error texts.
"""
