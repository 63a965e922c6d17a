"""``lab.mgmt``: the lab switch's management plane -- an EOS-style CLI over SSH.

One process per lab switch (``python -m lab.mgmt``) listens on loopback, speaks the subset of
Arista EOS that netmiko's ``arista_eos`` driver and the agent use, keeps a running config and
config sessions, persists ``startup-config`` and drives the data plane only through the
``lab.vswitch`` control socket.

Modules, by concern:

* ``names``       -- EOS ``EthernetN`` <-> data-plane ``ethN`` names, interface ranges;
* ``units``       -- ECN threshold units -> bytes, seconds -> milliseconds;
* ``model``       -- the configuration model (pure data);
* ``grammar``     -- the command-pattern matcher (EOS keyword abbreviation, error messages);
* ``config_commands`` -- configuration modes and their commands (edit the model);
* ``render``      -- model -> running-config text (and the ``| json`` command tree);
* ``translate``   -- model -> ``set_qos`` payload of the data plane;
* ``sessions``    -- config sessions, diffs, commit timers;
* ``switch``      -- the switch-wide state shared by every SSH connection;
* ``shows``       -- show commands, text and EOS-shaped JSON;
* ``cli_session`` -- one terminal: modes, prompts, exec commands, pipes;
* ``ssh_server``  -- asyncssh glue, terminal line discipline;
* ``persistence`` -- startup-config and host key files;
* ``dataplane``   -- async access to the vswitch control socket;
* ``launcher``    -- ``start_management`` / ``stop_management`` for the lab runtime.
"""
