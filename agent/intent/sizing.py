"""Tuning maths for a lossless RoCEv2 fabric: PFC headroom, ECN thresholds, DCQCN NIC defaults.

Pure functions over ints and floats: no I/O, no parsing (sizes and speeds arrive already
converted by :mod:`agent.intent.units`). Every formula and constant names its source.

Main sources:

* SONiC dynamic buffer calculation, sonic-net/sonic-swss ``cfgmgr/buffer_headroom_mellanox.lua``
  (commit 18913fa357264149fa4d4ba93638f58e1c8ad89b), "the lua" below.
* Spectrum-1 (MSN2700) ASIC parameters, sonic-net/sonic-buildimage
  ``platform/mellanox/asic_table.j2``; lossless traffic pattern, sonic-net/sonic-buildimage
  ``files/build_templates/buffers_config.j2`` (``LOSSLESS_TRAFFIC_PATTERN``).
* MSN2700 static table ``device/mellanox/x86_64-mlnx_msn2700-r0/ACS-MSN2700/pg_profile_lookup.ini``
  (sonic-buildimage; read from the edge-core/sonic-buildimage and fastiuk/sonic-buildimage mirrors).
* NVIDIA Cumulus Linux user guide, "RDMA over Converged Ethernet - RoCE" (``nv show qos roce``).
* Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015 (DCQCN).
* NVIDIA "DCQCN CC Parameters" (DOCA docs) / Mellanox community "DCQCN Parameters" (DOC-2790).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Final, Literal

from lossless.pfc import PAUSE_QUANTUM_BITS, PFC_QUANTA_MAX, pause_duration

# The path MTUs RoCE can use (IBTA, ``enum ib_mtu``), smallest first.
IB_MTUS: Final = (256, 512, 1024, 2048, 4096)
# What Linux subtracts from the netdev MTU before picking the RoCE MTU (``iboe_get_mtu`` in
# include/rdma/ib_addr.h): IB_GRH_BYTES 40 + IB_UDP_BYTES 8 + IB_BTH_BYTES 12 +
# IB_EXT_XRC_BYTES 4 + IB_EXT_ATOMICETH_BYTES 28 + IB_ICRC_BYTES 4 (include/rdma/ib_pack.h).
# The GRH stands for the IPv4/IPv6 header, so it covers RoCE v2 over IPv4 with room; rxe
# reserves less (RXE_MAX_HDR_LENGTH 80, drivers/infiniband/sw/rxe/rxe_param.h).
IBOE_MTU_OVERHEAD: Final = 40 + 8 + 12 + 4 + 28 + 4


def roce_mtu(netdev_mtu: int) -> int | None:
    """The RoCE (IB) path MTU a netdev MTU allows, as ``iboe_get_mtu`` picks it: the largest
    IB MTU that fits with :data:`IBOE_MTU_OVERHEAD`; None below 256. A 9000-byte Ethernet MTU
    still carries 4096-byte RoCE packets: RDMA never sends larger."""
    fitting = [m for m in IB_MTUS if m + IBOE_MTU_OVERHEAD <= netdev_mtu]
    return fitting[-1] if fitting else None


# Pause reaction delay, in pause quanta, per operating speed. The lua's pause_quanta_per_speed
# table (it cites IEEE 802.3 31B.3.7), re-keyed from Mb/s to bit/s.
PAUSE_QUANTA_BY_SPEED: Final[dict[int, int]] = {
    100_000_000: 1,
    1_000_000_000: 2,
    10_000_000_000: 67,
    25_000_000_000: 80,
    40_000_000_000: 118,
    50_000_000_000: 147,
    100_000_000_000: 394,
    200_000_000_000: 453,
    400_000_000_000: 905,
    800_000_000_000: 905,
}
_QUANTA_SPEEDS: Final = sorted(PAUSE_QUANTA_BY_SPEED)

# Propagation speed in the cable, m/s ("speed_of_light" in the lua).
CABLE_PROPAGATION_M_PER_S: Final = 198_000_000
_KIB: Final = 1024  # the lua rounds every threshold up to whole KiB
_MINIMAL_PACKET_BYTES: Final = 64  # the lua's minimal_packet_size


@dataclass(frozen=True)
class AsicBufferModel:
    """The inputs the lua reads from STATE_DB/CONFIG_DB besides speed, cable and MTU.

    Defaults are SONiC's for the MSN2700 (Spectrum-1): ``platform/mellanox/asic_table.j2``
    ``MELLANOX-SPECTRUM`` (cell_size 96, pipeline_latency 19 KiB, mac_phy_delay 0.8 KiB,
    peer_response_time 3.8 KiB) and ``buffers_config.j2`` ``LOSSLESS_TRAFFIC_PATTERN``
    (mtu 1024, small_packet_percentage 50; older revisions of that template said 100).
    """

    cell_size_bytes: int = 96
    pipeline_latency_bytes: float = 19 * _KIB
    mac_phy_delay_bytes: float = 0.8 * _KIB
    # The lua uses this only for speeds missing from its quanta table; here it is used for
    # every speed when use_pause_quanta is False.
    peer_response_time_bytes: float = 3.8 * _KIB
    lossless_mtu_bytes: int = 1024
    small_packet_percentage: int = 50
    gearbox_delay_ns: float = 0.0
    use_pause_quanta: bool = True
    # The lua computes bytes on cable as speed[Mb/s] * 1e9 / v / (8 * 1024), i.e. the physical
    # value times 1000/1024. False gives the physical 2 * L * speed / v / 8.
    lua_cable_scaling: bool = True


SPECTRUM1: Final = AsicBufferModel()

# The model that regenerates the MSN2700 pg_profile_lookup.ini exactly (all 15 rows, with a
# 9216-byte port MTU): the lua's formula with three older inputs, the ASIC table's fixed
# 3.8 KiB peer response instead of pause quanta, small_packet_percentage 100 (the earlier
# buffers_config.j2 value) and physical cable bytes (no 1000/1024 factor). Each of the three
# is needed: restoring any one current input breaks some row (tests/test_tuning.py).
SPECTRUM1_PG_LOOKUP_INI: Final = AsicBufferModel(
    small_packet_percentage=100, use_pause_quanta=False, lua_cable_scaling=False
)


@dataclass(frozen=True)
class Headroom:
    """PFC headroom of one lossless priority group, in bytes, as SONiC's Mellanox model means it.

    ``xoff`` is the buffer the PG must still absorb after it sends XOFF (everything in flight
    during the pause round trip); ``xon`` is the pipeline-latency reserve; ``size`` is what is
    reserved per PG in the independent headroom model (xon + xoff, rounded to KiB; the lua
    reserves only xon when a shared headroom pool is configured). The remaining fields are the
    lua's intermediate terms, for reports.
    """

    xoff: int
    xon: int
    size: int
    pause_quanta: int | None
    peer_response_bytes: float
    cable_bytes: float
    gearbox_bytes: float
    mac_phy_bytes: float
    propagation_bytes: float  # the lua's propagation_delay: mtu+cable+2*gearbox+mac/phy+peer
    cell_occupancy: float


def pause_quanta_for_speed(speed_bps: int) -> int:
    """Pause reaction quanta for a speed: the lua's table, else the next listed speed up.

    The lua falls back to the ASIC's fixed peer_response_time (3.8 KiB) for speeds it does not
    list, which makes 10 Mb/s need more headroom than 100 Mb/s. Taking the next listed speed's
    quanta instead keeps headroom monotonic in speed and errs towards more headroom; for
    10 Mb/s it gives the lua's 100 Mb/s value, 1 quantum (51.2 us at 10 Mb/s).
    """
    _check_speed(speed_bps)
    index = bisect.bisect_left(_QUANTA_SPEEDS, speed_bps)
    if index == len(_QUANTA_SPEEDS):
        raise ValueError(
            f"speed {speed_bps} b/s is above {_QUANTA_SPEEDS[-1]} b/s, the fastest speed with a "
            "known pause reaction delay (buffer_headroom_mellanox.lua)"
        )
    return PAUSE_QUANTA_BY_SPEED[_QUANTA_SPEEDS[index]]


def pause_quanta_duration_s(quanta: int, speed_bps: int) -> float:
    """How long ``quanta`` pause quanta last at ``speed_bps``: one quantum is 512 bit times."""
    if not 0 <= quanta <= PFC_QUANTA_MAX:
        raise ValueError(f"pause quanta must be 0..{PFC_QUANTA_MAX}, got {quanta}")
    _check_speed(speed_bps)
    return pause_duration(quanta, speed_bps)


def pfc_headroom(
    speed_bps: int,
    cable_m: float,
    mtu: int,
    *,
    model: AsicBufferModel = SPECTRUM1,
    lanes: int = 4,
) -> Headroom:
    """PFC headroom for one port, reproducing the arithmetic of buffer_headroom_mellanox.lua.

    ``mtu`` is the port MTU in bytes (the lua's ARGV[3]); the lossless traffic MTU and the ASIC
    constants come from ``model``. ``lanes=8`` applies the lua's 8-lane adjustment (doubled
    pipeline latency less 1 KiB, plus one MTU of size).
    """
    _check_speed(speed_bps)
    if not math.isfinite(cable_m) or cable_m < 0:
        raise ValueError(f"cable length must be a finite number of metres >= 0, got {cable_m}")
    _check_mtu(mtu)
    if lanes not in (1, 2, 4, 8):
        raise ValueError(f"lanes must be 1, 2, 4 or 8, got {lanes}")

    speed_mbps = speed_bps / 1_000_000  # the lua works in Mb/s
    pipeline_latency = model.pipeline_latency_bytes
    speed_overhead = 0
    if lanes == 8:
        pipeline_latency = pipeline_latency * 2 - _KIB
        speed_overhead = mtu

    # Worst-case cell use when packets are small: a 64-byte packet still takes whole cells.
    cell = model.cell_size_bytes
    if cell > 2 * _MINIMAL_PACKET_BYTES:
        worst_case_factor = cell / _MINIMAL_PACKET_BYTES
    else:
        worst_case_factor = (2 * cell) / (1 + cell)
    small = model.small_packet_percentage
    cell_occupancy = (100 - small + small * worst_case_factor) / 100

    gearbox_bytes = 0.0
    if model.gearbox_delay_ns != 0:
        gearbox_bytes = speed_mbps * model.gearbox_delay_ns / (8 * _KIB)

    quanta: int | None = None
    peer_response = model.peer_response_time_bytes
    if model.use_pause_quanta:
        quanta = pause_quanta_for_speed(speed_bps)
        peer_response = quanta * PAUSE_QUANTUM_BITS / 8  # the lua's "* 512 / 8"

    # Round trip on the cable: the pause travels to the peer while data keeps arriving.
    if model.lua_cable_scaling:
        cable_bytes = (
            2 * cable_m * speed_mbps * 1_000_000_000 / CABLE_PROPAGATION_M_PER_S / (8 * _KIB)
        )
    else:
        cable_bytes = 2 * cable_m * speed_bps / CABLE_PROPAGATION_M_PER_S / 8

    propagation = mtu + cable_bytes + 2 * gearbox_bytes + model.mac_phy_delay_bytes + peer_response
    xoff = _ceil_kib(model.lossless_mtu_bytes + propagation * cell_occupancy)
    xon = _ceil_kib(pipeline_latency)
    size = _ceil_kib(xoff + xon + speed_overhead)
    return Headroom(
        xoff=xoff,
        xon=xon,
        size=size,
        pause_quanta=quanta,
        peer_response_bytes=peer_response,
        cable_bytes=cable_bytes,
        gearbox_bytes=gearbox_bytes,
        mac_phy_bytes=model.mac_phy_delay_bytes,
        propagation_bytes=propagation,
        cell_occupancy=cell_occupancy,
    )


@dataclass(frozen=True)
class EcnThresholds:
    """WRED/ECN marking on the lossless queue: no marks below min, probability ramps to max_pct
    at max, every packet marked above max."""

    min_bytes: int
    max_bytes: int
    max_probability_pct: int


EcnProfile = Literal["nvidia", "dcqcn-paper"]

# Each profile is a cited (speed, thresholds) anchor.
# nvidia: Cumulus Linux `nv set qos roce` defaults, min 150,000 B (shown as 146.48 KB),
#   max 1,500,000 B (1.43 MB), probability 100 (Cumulus user guide, "RDMA over Converged
#   Ethernet - RoCE", Verify RoCE Configuration; Onyx `show roce`: Min 150, Max 1500 KB);
#   anchored at 100 Gb/s, the class those switches ship at.
# dcqcn-paper: Kmin 5 KB, Kmax 200 KB, Pmax 1 % on the 40 Gb/s testbed of Zhu et al.,
#   SIGCOMM 2015 (KB read as 1000 bytes, as in agent.intent.units).
ECN_ANCHORS: Final[dict[EcnProfile, tuple[int, EcnThresholds]]] = {
    "nvidia": (100_000_000_000, EcnThresholds(150_000, 1_500_000, 100)),
    "dcqcn-paper": (40_000_000_000, EcnThresholds(5_000, 200_000, 1)),
}
ETHERNET_MTU: Final = 1500  # IEEE 802.3 maximum payload; pass the fabric's MTU when jumbo


def ecn_thresholds(
    speed_bps: int, *, mtu: int = ETHERNET_MTU, profile: EcnProfile = "nvidia"
) -> EcnThresholds:
    """Recommended ECN thresholds for a port speed.

    The profile's anchor is scaled linearly with speed, which keeps the queueing delay at
    which marking starts and saturates constant (nvidia: 12 us and 120 us of line time), i.e.
    proportional to the bandwidth-delay product at a fixed RTT. At slow (lab) speeds the
    scaled values fall below a frame, so two floors apply: min >= 2 MTU (two frames queued
    back to back are not congestion) and max >= min + 2 MTU (the marking ramp spans frames,
    not a step). The probability is the profile's, unscaled.
    """
    _check_speed(speed_bps)
    _check_mtu(mtu)
    anchor_speed, anchor = ECN_ANCHORS[profile]
    min_bytes = max(anchor.min_bytes * speed_bps // anchor_speed, 2 * mtu)
    max_bytes = max(anchor.max_bytes * speed_bps // anchor_speed, min_bytes + 2 * mtu)
    return EcnThresholds(min_bytes, max_bytes, anchor.max_probability_pct)


def ecn_thresholds_below_xoff(
    speed_bps: int, xoff_bytes: int, mtu: int, *, profile: EcnProfile = "nvidia"
) -> EcnThresholds:
    """ECN thresholds that mark before PFC can fire: max_bytes <= xoff_bytes - mtu.

    DCQCN relies on ECN acting before PFC (Zhu et al. 2015). The rule: take
    :func:`ecn_thresholds`, cap max at one MTU below xoff (the frame that crosses max must
    still fit under xoff), then lower min if needed to keep a band of at least one MTU.
    The result keeps min >= 1 MTU; if xoff is below 3 MTU no such band exists and this raises.
    """
    _check_mtu(mtu)
    ceiling = xoff_bytes - mtu
    if ceiling < 2 * mtu:
        raise ValueError(
            f"xoff {xoff_bytes} B leaves no room for ECN marking below it with MTU {mtu} B: "
            f"need xoff >= 3 * MTU = {3 * mtu} B"
        )
    base = ecn_thresholds(speed_bps, mtu=mtu, profile=profile)
    max_bytes = min(base.max_bytes, ceiling)
    min_bytes = min(base.min_bytes, max_bytes - mtu)
    return EcnThresholds(min_bytes, max_bytes, base.max_probability_pct)


# mlx5 DCQCN defaults, keyed by the sysfs names under /sys/class/net/<if>/ecn/roce_rp/ and
# .../roce_np/ (MLNX_OFED mlx5 en_sysfs.c, e.g. oracle/linux-uek
# drivers/net/ethernet/mellanox/mlx5/core/en_sysfs.c). Values and units: NVIDIA "DCQCN CC
# Parameters" (https://networking-docs.nvidia.com/doca/archive/3-4-0/dcqcn-cc-parameters) and
# Mellanox "DCQCN Parameters" (https://community.mellanox.com/docs/DOC-2790); the rate-increase
# and notification-point defaults agree with the firmware defaults `mlxconfig query` prints
# for ConnectX (RPG_TIME_RESET 300, RPG_BYTE_RESET 32767, RPG_AI_RATE 5, RPG_HAI_RATE 50,
# MIN_TIME_BETWEEN_CNPS 4, CNP_DSCP 48, CNP_802P_PRIO 6).
_DCQCN_NIC_DEFAULTS: Final[dict[str, tuple[int, str]]] = {
    # reaction point (sender); the two clamp flags as `mlxconfig query` prints them for
    # ConnectX (CLAMP_TGT_RATE False, CLAMP_TGT_RATE_AFTER_TIME_INC True) and the kernel's
    # mlx5 congestion parameters name them (rp_clamp_tgt_rate, rp_clamp_tgt_rate_ati,
    # drivers/infiniband/hw/mlx5/cong.c)
    "clamp_tgt_rate": (0, "1: every CNP sets the target rate to the current rate"),
    "clamp_tgt_rate_after_time_inc": (1, "1: so does a CNP after a timer-driven increase"),
    "rpg_time_reset": (300, "us between rate increases without CNPs"),
    "rpg_byte_reset": (32767, "bytes sent between rate increases without CNPs"),
    "rpg_ai_rate": (5, "Mb/s, additive-increase step"),
    "rpg_hai_rate": (50, "Mb/s, hyper-increase step"),
    "rpg_gd": (11, "alpha-to-rate-reduction shift (log2)"),
    "rpg_min_dec_fac": (50, "%, largest single rate cut"),
    "rpg_min_rate": (1, "Mb/s, lowest QP rate"),
    "dce_tcp_g": (1019, "1/1024, alpha update gain"),
    "rate_reduce_monitor_period": (4, "us between rate reductions"),
    "initial_alpha_value": (1023, "1/1024, alpha on the first CNP"),
    # notification point (receiver)
    "min_time_between_cnps": (4, "us between CNPs from the port"),
    "cnp_dscp": (48, "DSCP of generated CNPs"),
    "cnp_802p_prio": (6, "802.1p priority of generated CNPs"),
}
DCQCN_NIC_UNITS: Final[dict[str, str]] = {k: unit for k, (_, unit) in _DCQCN_NIC_DEFAULTS.items()}


def dcqcn_nic_defaults() -> dict[str, int]:
    """mlx5 DCQCN defaults by sysfs parameter name (units in :data:`DCQCN_NIC_UNITS`)."""
    return {name: value for name, (value, _) in _DCQCN_NIC_DEFAULTS.items()}


def _ceil_kib(value: float) -> int:
    return math.ceil(value / _KIB) * _KIB


def _check_speed(speed_bps: int) -> None:
    if speed_bps <= 0:
        raise ValueError(f"speed must be a positive number of bits per second, got {speed_bps}")


def _check_mtu(mtu: int) -> None:
    if mtu <= 0:
        raise ValueError(f"MTU must be a positive number of bytes, got {mtu}")
