"""Arista EOS personality of the lab switch's management plane.

The subset of EOS that netmiko's ``arista_eos`` driver and the agent use: a CLI with EOS'
prompts, modes and errors, ``| json`` shows, config sessions with ``commit timer``, and
``startup-config``. Modules (the shape every ``lab/mgmt/<nos>/`` package has):

* ``personality`` -- the switch-wide state (sessions, startup-config) and new terminals;
* ``state``       -- what the terminal needs of it (a protocol);
* ``cli``         -- one terminal: modes, prompts, exec commands, pipes;
* ``commands``    -- configuration modes and their commands (they edit the shared model);
* ``shows``       -- show commands, text and EOS-shaped JSON (``lldp``: the LLDP ones);
* ``grammar``     -- the command-pattern matcher (keyword abbreviation, EOS' error messages);
* ``render``      -- the model as running-config text (and the ``| json`` command tree);
* ``sessions``    -- config sessions, diffs, commit timers.

No ``translate``: EOS' running-config is the shared model (:mod:`lab.mgmt.model`), which
:mod:`lab.mgmt.dataplane_qos` turns into the data plane's payload for every NOS.
"""
