"""Cisco NX-OS (Nexus 9000) personality of the lab switch's management plane.

The subset of NX-OS that netmiko's ``cisco_nxos`` driver and the agent use, written from
Cisco's Nexus 9000 NX-OS QoS and System Management configuration guides and command
reference (docs/lab-nxos.md cites each command): the ``switch#`` CLI with NX-OS' modes,
prompts and errors, MQC QoS (class-maps, the three kinds of policy-map, ``system qos``), PFC
and its watchdog, the shows the agent reads (with ``| json`` where NX-OS' JSON is on record),
checkpoints and ``rollback``, ``configure replace`` with its commit timer, ``bootflash:``
over SCP, and the startup-config. Modules (the shape every ``lab/mgmt/<nos>/`` package has):

* ``personality`` -- the switch-wide state (running config, checkpoints, the replace timer,
  bootflash:, startup-config) and new terminals;
* ``state``       -- what the terminal needs of it (a protocol);
* ``cli``         -- one terminal: modes, prompts, exec commands, pipes, NX-OS' errors;
* ``commands``    -- configuration modes and their commands (they edit ``config``);
* ``config``      -- NX-OS' configuration as the switch holds it;
* ``render``      -- that configuration as ``show running-config`` prints it;
* ``shows``       -- show commands, text and JSON (``lldp``: the LLDP and interface tables);
* ``translate``   -- the configuration into the shared model (:mod:`lab.mgmt.model`);
* ``rollback``    -- checkpoints, rollback, configure replace and its commit timer;
* ``bootflash``   -- the ``bootflash:`` file system and its SCP/SFTP access.

The command matcher and the show pipes are shared with EOS (:mod:`lab.mgmt.cli_grammar`,
:mod:`lab.mgmt.cli_output`).
"""
