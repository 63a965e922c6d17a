"""Arista EOS personality of the lab switch's management plane.

The subset of EOS that netmiko's ``arista_eos`` driver and the agent use: a CLI with EOS'
prompts, modes and errors, ``| json`` shows, config sessions with ``commit timer``, and
``startup-config``. Modules (the shape every ``lab/mgmt/<nos>/`` package has):

* ``personality`` -- the switch-wide state (sessions, startup-config) and new terminals;
* ``state``       -- what the terminal needs of it (a protocol);
* ``cli``         -- one terminal: modes, prompts, exec commands, pipes;
* ``commands``    -- configuration modes and their commands (they edit the shared model);
* ``shows``       -- show commands, text and EOS-shaped JSON (``lldp``: the LLDP ones);
* ``render``      -- the model as running-config text (and the ``| json`` command tree);
* ``sessions``    -- config sessions, diffs, commit timers.

The command-pattern matcher (keyword abbreviation, EOS' error messages) and the show pipes are
shared with NX-OS: :mod:`lab.mgmt.cli_grammar`, :mod:`lab.mgmt.cli_output`.

No ``translate``: EOS' running-config is the shared model (:mod:`lab.mgmt.model`), which
:mod:`lab.mgmt.dataplane_qos` turns into the data plane's payload for every NOS.
"""
