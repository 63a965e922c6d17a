"""Lab hosts that are small VMs with a real RDMA stack (``roce.lab/rdma: rxe``).

A host node labelled ``roce.lab/rdma: rxe`` keeps its network namespace and its veth to the
leaf, but the host itself is a qemu VM (TCG: KVM is not usable here) running a stock Debian
kernel with Soft-RoCE (``rdma_rxe``), rdma-core and perftest from Debian, booted by
virtme-ng on a read-only view of this machine's root file system. Between the VM and the lab
link sits :mod:`lab.vmhost.nic`, the VM's NIC port: it runs in the host's namespace, sends
the VM's frames onto the link at the port's speed, honours the PFC frames the switch sends
(per priority, with :mod:`lossless.pfc`, as a RoCE NIC does) and counts what a NIC's
``ethtool -S`` would. The VM reaches it over a qemu ``stream`` socket, which also carries the
NIC's back-pressure into the guest: while a priority is paused the NIC stops reading, qemu
stops draining virtio's TX ring, and rxe stops sending (its in-flight skb limit), so RoCE
is held rather than dropped. The VM's management NIC is qemu user networking with one
forwarded port on loopback for SSH: the agent reaches the host like any real one.

:mod:`lab.vmhost.vm` builds the qemu command (``virtme-run --dry-run --show-command``),
the guest's start script and its sshd; :mod:`lab.vmhost.nic` is the NIC process.
"""
