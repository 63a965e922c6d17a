"""What the lab tests share, imported as ``tests.lab.support.<module>`` (the fixtures alone
live in ``tests/lab/conftest.py``).

- :mod:`.labs`: a ``roce-agent lab`` started and always torn down, the CLIs as a user runs them.
- :mod:`.eos`: the lab switches over SSH, as the agent reaches them (netmiko ``arista_eos``).
- :mod:`.dataplane`: the lab switches' data plane through their control sockets.
- :mod:`.vswitch`, :mod:`.frames`, :mod:`.pfc_sender`: one ``lab.vswitch`` wired to host
  namespaces, the frames the tests send and read, and a pause-honouring sender.
- :mod:`.mgmt`: that switch with its management plane.
- :mod:`.netns_pair`: two namespaces joined by one veth pair.
- :mod:`.prometheus`, :mod:`.rdma`: a real Prometheus; the lab's Soft-RoCE VMs.
- :mod:`.polling`, :mod:`.loopback`: waiting for a condition; a free loopback port.
"""
