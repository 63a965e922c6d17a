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
# slot took over 30 s for rxe's 1024 slots in the lab's VMs (no KVM).
SHOW_GIDS = r"""
printf 'DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4\t\tVER\tDEV\n'
printf -- '---\t----\t-----\t---\t\t\t\t\t------------\t---\t---\n'
n=0
for d in "${SYSFS:-/sys}"/class/infiniband/*; do [ -d "$d/ports" ] || continue
 for p in "$d"/ports/*; do for g in $(grep -l -v -x 0000:0000:0000:0000:0000:0000:0000:0000 \
  "$p"/gids/* 2>/dev/null); do
  i=${g##*/}; gid=$(cat "$g" 2>/dev/null) || continue
  [ "$gid" = 0000:0000:0000:0000:0000:0000:0000:0000 ] && continue
  t=$(cat "$p/gid_attrs/types/$i" 2>/dev/null) || continue
  nd=$(cat "$p/gid_attrs/ndevs/$i" 2>/dev/null)
  v=$(printf '%s' "$t" | grep -o '[Vv][12]$' | tr V v)
  ip=''
  case $gid in 0000:0000:0000:0000:0000:ffff:*)
   h=$(printf '%s' "${gid#0000:0000:0000:0000:0000:ffff:}" | tr -d :)
   ip=$(printf '%d.%d.%d.%d' "0x${h%??????}" "0x$(printf '%s' "$h" | cut -c3-4)" \
    "0x$(printf '%s' "$h" | cut -c5-6)" "0x${h#??????}");;
  esac
  printf '%s\t%s\t%s\t%s\t\t%s\t%s\t%s\n' "${d##*/}" "${p##*/}" "$i" "$gid" "$ip" "$v" "$nd"
  n=$((n+1))
 done; done
done
echo "n_gids_found=$n"
""".strip()

SOURCES: tuple[HostSource, ...] = (HostSource("gids", SHOW_GIDS),)


def source(name: str) -> HostSource:
    return next(s for s in SOURCES if s.name == name)
