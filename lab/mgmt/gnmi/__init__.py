"""gNMI on the lab switches: each NOS personality's own paths, encodings and RPC modes,
filled from the live data-plane counters, in the management process's event loop.

* ``paths``    -- gNMI paths: parse, print, join, match with wildcards;
* ``snapshot`` -- one counters read shared by every subscriber sampling at the same time;
* ``nos``      -- what a NOS's server is (port, RPCs, modes, encodings, its tree);
* ``sonic``, ``nvue``, ``eos`` -- the trees, each citing the vendor's documents;
* ``openconfig`` -- the leaf trees EOS and Cumulus share;
* ``stream``   -- ONCE, POLL and STREAM (SAMPLE, ON_CHANGE) of one Subscribe RPC;
* ``server``   -- the servicer: credentials, TLS, limits;
* ``faults``   -- the lab's fault knobs for drills of a gNMI client;
* ``tls``      -- the lab's CA and the switches' server certificates.

NX-OS has no gNMI server in this lab (:func:`tree_for` answers None).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.mgmt.gnmi.eos import EosTree
from lab.mgmt.gnmi.nos import NosTree
from lab.mgmt.gnmi.nvue import NvueTree
from lab.mgmt.gnmi.sonic import SonicTree

TREES: dict[str, type[NosTree]] = {"sonic": SonicTree, "nvue": NvueTree, "eos": EosTree}


def tree_for(nos: str, ports: Sequence[str] = ()) -> NosTree | None:
    """The gNMI tree of a NOS personality over data-plane ``ports`` (None: no gNMI)."""
    cls = TREES.get(nos)
    return cls(ports) if cls is not None else None


def default_port(nos: str) -> int | None:
    """The NOS's documented gNMI port (None: the NOS serves none here)."""
    cls = TREES.get(nos)
    return cls.default_port if cls is not None else None
