"""SONiC management-plane personality of the lab switch: a Linux shell (netmiko ``linux``),
CONFIG_DB, the Generic Config Updater (checkpoint / apply-patch / rollback), systemd-run timers
and the sonic-utilities show commands, all driving the shared data plane.

See ``docs/lab-sonic.md`` for what is emulated, from which source, and how it differs.
Modules (the shape every ``lab/mgmt/<nos>/`` package has):

* ``personality`` -- the switch-wide state (CONFIG_DB, checkpoints, /tmp, timers) and new
  terminals;
* ``state``       -- what the shell and the commands need of it (a protocol);
* ``shell``       -- the SONiC login shell (:mod:`lab.mgmt.linux_shell` with heredocs, ``sudo``,
  ``sh -c`` and the switch's files);
* ``commands``    -- ``config``, ``sonic-cfggen``, ``show``, ``pfcwd``, ``systemd-run``, ...;
* ``shows``       -- the sonic-utilities show commands' output;
* ``translate``   -- CONFIG_DB -> the shared model (:mod:`lab.mgmt.model`);
* ``configdb``, ``schema``, ``gcu``, ``jsonpatch``, ``checkpoints``, ``timers``, ``lldp``,
  ``text`` -- CONFIG_DB and its file, YANG-style validation, the Generic Config Updater, JSON
  patches, checkpoint files, systemd timers, ``lldpctl``, sonic-utilities' text helpers.
"""
