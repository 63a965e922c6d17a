"""The commands a host is asked, one :class:`HostSource` each (collected into
:class:`agent.observe.hostfacts.HostFacts`, parsed where they are used).

Per-port sources take ``{device}``, ``{ib_port}`` and ``{netdev}`` from
:class:`agent.observe.hostfacts.RdmaPortFacts`. Commands are read-only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostSource:
    name: str
    command: str
    per_port: bool = False
    sudo: bool = False  # needs root to show everything (run as ``sudo -n``)


# The GID table of every RDMA device in the text of NVIDIA's show_gids (parsed by
# agent.observe.perftest.gid.parse_show_gids), read from sysfs as show_gids does, so a host
# without MLNX_OFED's script answers the same. One grep lists a port's used slots: a `cat` per
# slot took over 30 s for rxe's 1024 slots in the lab's VMs (no KVM). The rest is the shell's
# own built-ins (read, case, arithmetic, printf): a process per field is what a host without
# KVM pays most for (docs/measurements/2026-12-02-test-suite.md). Only an IPv4-mapped GID of
# hex groups is converted: arithmetic on anything else would stop the whole script.
SHOW_GIDS = r"""
printf 'DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n'
printf -- '---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n'
Z=0000:0000:0000:0000:0000:0000:0000:0000 X=[0-9a-fA-F]
n=0
for d in "${SYSFS:-/sys}"/class/infiniband/*; do [ -d "$d/ports" ] || continue
 for p in "$d"/ports/*; do for g in $(grep -l -v -x "$Z" "$p"/gids/* 2>/dev/null); do
  i=${g##*/}
  { read -r gid <"$g"; } 2>/dev/null || continue
  [ "$gid" = "$Z" ] && continue
  { read -r t <"$p/gid_attrs/types/$i"; } 2>/dev/null || continue
  nd=''; { read -r nd <"$p/gid_attrs/ndevs/$i"; } 2>/dev/null
  case $t in *[Vv]1) v=v1;; *[Vv]2) v=v2;; *) v='';; esac
  ip=''
  case $gid in 0000:0000:0000:0000:0000:ffff:$X$X$X$X:$X$X$X$X)
   hi=${gid#0000:0000:0000:0000:0000:ffff:}; lo=${hi#*:}; hi=${hi%:*}
   ip=$((0x${hi%??})).$((0x${hi#??})).$((0x${lo%??})).$((0x${lo#??}));;
  esac
  printf '%s\t%s\t%s\t%s\t\t%s\t%s\t%s\n' "${d##*/}" "${p##*/}" "$i" "$gid" "$ip" "$v" "$nd"
  n=$((n+1))
 done; done
done
echo "n_gids_found=$n"
""".strip()

# --------------------------------------------------------------------------- pre-flight
# The sources of the host pre-flight checks (agent/observe/checks/hosts.py, parsed by
# agent/observe/hostparse.py; recorded outputs and where each format comes from in
# tests/data/hosts/README.md). One line each, so an "unverified" message names the command.

# MLNX_OFED's mlx5 "force traffic class": ``Global tclass=N`` when set, nothing when not
# (traffic_class_show in MLNX_OFED's drivers/infiniband/hw/mlx5/main_ext.c); the file does not
# exist without MLNX_OFED or on other drivers, which is said, not failed.
TRAFFIC_CLASS = (
    "f=/sys/class/infiniband/{device}/tc/{ib_port}/traffic_class; "
    'if [ -e "$f" ]; then cat "$f"; else echo "absent: $f"; fi'
)
# What the RoCE-enabled check needs about the device, as key=value lines: the port's link
# layer (sysfs-class-infiniband ABI: "Ethernet" for RoCE), rxe's ``parent`` netdev (only rxe
# has it: drivers/infiniband/sw/rxe/rxe_verbs.c parent_show), the PCI driver and address.
RDMA_DEVICE = (
    "d=/sys/class/infiniband/{device}; "
    '[ -r "$d/ports/{ib_port}/link_layer" ] || '
    '{{ echo "no RDMA port $d/ports/{ib_port}"; exit 1; }}; '
    'echo "link_layer=$(cat "$d/ports/{ib_port}/link_layer")"; '
    'echo "parent=$(cat "$d/parent" 2>/dev/null)"; '
    'echo "driver=$(basename "$(readlink -f "$d/device/driver" 2>/dev/null)" 2>/dev/null)"; '
    'echo "pci=$(basename "$(readlink -f "$d/device" 2>/dev/null)" 2>/dev/null)"'
)
# devlink's generic enable_roce (kernel Documentation/networking/devlink/devlink-params.rst,
# mlx5.rst: driverinit), text as iproute2 devlink/devlink.c pr_out_param prints it.
ENABLE_ROCE = (
    "devlink dev param show "
    'pci/"$(basename "$(readlink -f /sys/class/infiniband/{device}/device)")" name enable_roce'
)
# Every PCI function's sysfs path (the bridges above a device are the path's components) and
# each RDMA device's PCI function: the GPU-to-NIC bridges without nvidia-smi topo's classes.
PCI_PATHS = (
    'for d in /sys/class/infiniband/*; do [ -e "$d/device" ] && '
    'echo "ib ${d##*/} $(readlink -f "$d/device")"; done; '
    'for d in /sys/bus/pci/devices/*; do echo "pci $(readlink -f "$d")"; done'
)

# What the job environment reads (agent.observe.hostfacts.collect_host_facts's default).
SOURCES: tuple[HostSource, ...] = (HostSource("gids", SHOW_GIDS),)

# What the host pre-flight checks read (agent.observe.collect with hosts=True): the GID table
# and the rest, each run once per host or once per RDMA port.
PREFLIGHT_SOURCES: tuple[HostSource, ...] = (
    *SOURCES,
    # NVIDIA's documented query (nvidia-smi --help-query-gpu: pci.bus_id), one GPU a line.
    HostSource("gpus", "nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader"),
    HostSource("pci_paths", PCI_PATHS),
    # ACSCap/ACSCtl are in the extended capabilities, which lspci shows to root only.
    HostSource("lspci", "lspci -D -vvv", sudo=True),
    HostSource("traffic_class", TRAFFIC_CLASS, per_port=True),
    HostSource("mlnx_qos", "mlnx_qos -i {netdev}", per_port=True),
    HostSource("dcb_app", "dcb -N app show dev {netdev} dscp-prio", per_port=True),
    HostSource("dcb_pfc", "dcb pfc show dev {netdev}", per_port=True),
    HostSource("rdma_device", RDMA_DEVICE, per_port=True),
    HostSource("enable_roce", ENABLE_ROCE, per_port=True),
    HostSource("mtu", "cat /sys/class/net/{netdev}/mtu", per_port=True),
    HostSource("ibv_devinfo", "ibv_devinfo -d {device} -i {ib_port}", per_port=True),
)


def source(name: str) -> HostSource:
    return next(s for s in PREFLIGHT_SOURCES if s.name == name)
