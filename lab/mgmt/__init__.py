"""``lab.mgmt``: the lab switch's management plane -- SSH terminals that speak a NOS.

One process per lab switch (``python -m lab.mgmt --nos eos|sonic|nvue``) listens on loopback,
speaks the NOS the topology label ``roce.lab/nos`` names, keeps that NOS's configuration
(EOS sessions and startup-config, SONiC's CONFIG_DB and checkpoints, NVUE's revisions), and
drives the data plane only through the ``lab.vswitch`` control socket.

Each NOS is a package of the same shape -- ``lab/mgmt/eos/``, ``lab/mgmt/sonic/``,
``lab/mgmt/nvue/`` (and the next one, e.g. ``lab/mgmt/nxos/``) -- registered by name in
:data:`lab.mgmt.personality.PERSONALITIES`:

* ``personality`` -- the NOS's switch-wide state, its start, its terminals;
* ``state``       -- what its terminal and commands need of that state (a protocol);
* ``shell`` / ``cli`` -- one terminal (the Linux-based NOSes build on :mod:`linux_shell`);
* ``commands``    -- what the terminal runs beyond its built-ins;
* ``shows``       -- the show commands' output;
* ``translate``   -- the NOS's native configuration -> the shared model (EOS has none: its
  running-config is the model).

What every NOS shares stays here:

* ``switch``          -- :class:`SwitchManager`: the running model, the one path to the data
  plane (``install``), the ports, the clock;
* ``model``           -- the shared configuration model (pure data, in EOS' terms);
* ``dataplane_qos``   -- the model -> the data plane's ``set_qos`` payload;
* ``dataplane_handle`` -- async access to the vswitch control socket;
* ``personality``     -- the Terminal and Personality protocols and the NOS registry;
* ``linux_shell``     -- the bash login shell of the Linux-based NOSes, its built-ins;
* ``names``, ``cli_units`` -- port names of every NOS; ECN threshold units, seconds <-> ms;
* ``lldp``            -- each port's link and LLDP neighbour, from the lab's ``links.json``;
* ``ssh_server``      -- asyncssh glue, terminal line discipline, fault knobs;
* ``gnmi``            -- the gNMI server beside SSH: each NOS's paths from the same counters
  (SONiC, Cumulus, EOS; NX-OS none), TLS from the lab's CA, its own fault knobs;
* ``persistence``     -- the host key and startup-config files;
* ``launcher``        -- ``start_management`` / ``stop_management`` for the lab runtime;
* ``testing``         -- test doubles (data plane, clock) and an in-process SSH switch.
"""
