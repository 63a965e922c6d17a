"""Tests for agent.intent.sizing: PFC headroom, pause quanta, ECN thresholds, DCQCN NIC defaults."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.intent.sizing import (
    DCQCN_NIC_UNITS,
    PAUSE_QUANTA_BY_SPEED,
    SPECTRUM1,
    SPECTRUM1_PG_LOOKUP_INI,
    AsicBufferModel,
    EcnProfile,
    EcnThresholds,
    dcqcn_nic_defaults,
    ecn_thresholds,
    ecn_thresholds_below_xoff,
    pause_quanta_duration_s,
    pause_quanta_for_speed,
    pfc_headroom,
)

G = 1_000_000_000
M = 1_000_000

# sonic-buildimage device/mellanox/x86_64-mlnx_msn2700-r0/ACS-MSN2700/pg_profile_lookup.ini,
# every row: (speed Mb/s, cable m, size, xon, xoff).
MSN2700_PG_PROFILE_LOOKUP = [
    (10000, 5, 49152, 19456, 29696),
    (25000, 5, 49152, 19456, 29696),
    (40000, 5, 49152, 19456, 29696),
    (50000, 5, 49152, 19456, 29696),
    (100000, 5, 50176, 19456, 30720),
    (10000, 40, 49152, 19456, 29696),
    (25000, 40, 51200, 19456, 31744),
    (40000, 40, 52224, 19456, 32768),
    (50000, 40, 53248, 19456, 33792),
    (100000, 40, 58368, 19456, 38912),
    (10000, 300, 56320, 19456, 36864),
    (25000, 300, 67584, 19456, 48128),
    (40000, 300, 78848, 19456, 59392),
    (50000, 300, 86016, 19456, 66560),
    (100000, 300, 123904, 19456, 104448),
]


@pytest.mark.parametrize(
    ("speed_mbps", "cable_m", "size", "xon", "xoff"), MSN2700_PG_PROFILE_LOOKUP
)
def test_pg_lookup_ini_is_reproduced_exactly(
    speed_mbps: int, cable_m: int, size: int, xon: int, xoff: int
) -> None:
    # Tolerance 0. The ini is the lua's formula with older inputs: peer response = the ASIC
    # table's fixed 3.8 KiB instead of pause quanta, small_packet_percentage 100 instead of 50,
    # cable bytes without the lua's 1000/1024 factor, and a 9216-byte port MTU.
    got = pfc_headroom(speed_mbps * M, cable_m, 9216, model=SPECTRUM1_PG_LOOKUP_INI)
    assert (got.size, got.xon, got.xoff) == (size, xon, xoff)


@pytest.mark.parametrize(
    ("field", "current_value"),
    [
        ("use_pause_quanta", True),
        ("small_packet_percentage", 50),
        ("lua_cable_scaling", True),
    ],
)
def test_each_ini_difference_from_the_current_lua_matters(field: str, current_value: Any) -> None:
    # Putting back any one of the current lua's inputs breaks at least one ini row, so all
    # three differences are needed to explain the table.
    model = dataclasses.replace(SPECTRUM1_PG_LOOKUP_INI, **{field: current_value})
    mismatches = [
        row
        for row in MSN2700_PG_PROFILE_LOOKUP
        if pfc_headroom(row[0] * M, row[1], 9216, model=model).xoff != row[4]
    ]
    assert mismatches


def test_ini_needs_port_mtu_9216() -> None:
    # With SONiC's usual 9100-byte port MTU the 100G 5 m row comes out 1 KiB short.
    got = pfc_headroom(100 * G, 5, 9100, model=SPECTRUM1_PG_LOOKUP_INI)
    assert got.xoff == 30720 - 1024


# The current lua with the Spectrum-1 defaults, port MTU 9100. Worked by hand:
#   cell occupancy = (100 - 50 + 50 * 2*96/97) / 100 = 1.4896907...
#   cable bytes = 2 * L * speed_Mbps * 1e9 / 198e6 / 8192  (616.517 B for 100G 5 m)
#   propagation = 9100 + cable + 819.2 (mac/phy) + quanta * 64 (peer response)
#   xoff = ceil_KiB(1024 + propagation * occupancy), xon = 19 KiB, size = xon + xoff
#   100G 5 m:  9100 + 616.52 + 819.2 + 25216 = 35751.72 -> 1024 + 53259.0 = 54283 -> 55296
#   100G 40 m: 9100 + 4932.13 + 819.2 + 25216 = 40067.33 -> 1024 + 59687.9 = 60712 -> 61440
#   40G 5 m:   9100 + 246.61 + 819.2 + 7552 = 17717.81 -> 1024 + 26394.0 = 27418 -> 27648
#   10G 5 m:   9100 + 61.65 + 819.2 + 4288 = 14268.85 -> 1024 + 21256.2 = 22280 -> 22528
@pytest.mark.parametrize(
    ("speed_bps", "cable_m", "xoff", "xon", "size"),
    [
        (100 * G, 5, 55296, 19456, 74752),
        (100 * G, 40, 61440, 19456, 80896),
        (40 * G, 5, 27648, 19456, 47104),
        (10 * G, 5, 22528, 19456, 41984),
    ],
)
def test_current_lua_arithmetic(
    speed_bps: int, cable_m: int, xoff: int, xon: int, size: int
) -> None:
    got = pfc_headroom(speed_bps, cable_m, 9100)
    assert (got.xoff, got.xon, got.size) == (xoff, xon, size)


def test_breakdown_fields_at_100g() -> None:
    got = pfc_headroom(100 * G, 5, 9100)
    assert got.pause_quanta == 394
    assert got.peer_response_bytes == 394 * 512 / 8
    assert got.cable_bytes == pytest.approx(2 * 5 * 100e9 / 198e6 / 8 * 1000 / 1024)
    assert got.mac_phy_bytes == pytest.approx(819.2)
    assert got.cell_occupancy == pytest.approx(1.4896907, rel=1e-7)
    assert got.propagation_bytes == pytest.approx(9100 + got.cable_bytes + 819.2 + 25216)


def test_eight_lane_adjustment() -> None:
    # The lua's 8-lane rule: pipeline latency doubled less 1 KiB, one extra MTU of size.
    four = pfc_headroom(400 * G, 5, 9100)
    eight = pfc_headroom(400 * G, 5, 9100, lanes=8)
    assert eight.xoff == four.xoff
    assert eight.xon == 2 * 19456 - 1024
    assert eight.size == math.ceil((eight.xoff + eight.xon + 9100) / 1024) * 1024


def test_gearbox_delay_adds_headroom() -> None:
    with_gearbox = AsicBufferModel(gearbox_delay_ns=400)
    got = pfc_headroom(100 * G, 5, 9100, model=with_gearbox)
    assert got.gearbox_bytes == pytest.approx(100_000 * 400 / 8192)
    assert got.xoff > pfc_headroom(100 * G, 5, 9100).xoff


@pytest.mark.parametrize(
    ("speed_bps", "quanta"),
    [
        # buffer_headroom_mellanox.lua pause_quanta_per_speed, key in Mb/s -> value
        (100 * M, 1),
        (1 * G, 2),
        (10 * G, 67),
        (25 * G, 80),
        (40 * G, 118),
        (50 * G, 147),
        (100 * G, 394),
        (200 * G, 453),
        (400 * G, 905),
        (800 * G, 905),
        # not in the lua: the next listed speed up
        (10 * M, 1),
        (2_500 * M, 67),
        (20 * G, 80),
    ],
)
def test_pause_quanta_for_speed(speed_bps: int, quanta: int) -> None:
    assert pause_quanta_for_speed(speed_bps) == quanta


def test_pause_quanta_table_matches_lookup() -> None:
    assert all(pause_quanta_for_speed(s) == q for s, q in PAUSE_QUANTA_BY_SPEED.items())


@pytest.mark.parametrize(
    ("quanta", "speed_bps", "seconds"),
    [
        (1, 100 * G, 5.12e-9),
        (394, 100 * G, 2.01728e-6),
        (1, 10 * M, 51.2e-6),
        (0xFFFF, 10 * M, 3.3553920),
        (0, 10 * G, 0.0),
    ],
)
def test_pause_quanta_duration(quanta: int, speed_bps: int, seconds: float) -> None:
    assert pause_quanta_duration_s(quanta, speed_bps) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: pfc_headroom(0, 5, 9100), "speed"),
        (lambda: pfc_headroom(1600 * G, 5, 9100), "above"),
        (lambda: pfc_headroom(100 * G, -1, 9100), "cable"),
        (lambda: pfc_headroom(100 * G, math.nan, 9100), "cable"),
        (lambda: pfc_headroom(100 * G, 5, 0), "MTU"),
        (lambda: pfc_headroom(100 * G, 5, 9100, lanes=3), "lanes"),
        (lambda: pause_quanta_duration_s(-1, 10 * G), "quanta"),
        (lambda: pause_quanta_duration_s(0x10000, 10 * G), "quanta"),
        (lambda: pause_quanta_duration_s(1, 0), "speed"),
        (lambda: ecn_thresholds(0), "speed"),
        (lambda: ecn_thresholds(10 * G, mtu=0), "MTU"),
        (lambda: ecn_thresholds_below_xoff(10 * M, 4000, 1500), "xoff"),
    ],
)
def test_bad_input_is_named(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("speed_bps", "profile", "mtu", "expected"),
    [
        # Cumulus `nv set qos roce` defaults at their 100G anchor
        (100 * G, "nvidia", 9216, EcnThresholds(150_000, 1_500_000, 100)),
        # DCQCN paper (Zhu et al. 2015) at its 40G anchor
        (40 * G, "dcqcn-paper", 1500, EcnThresholds(5_000, 200_000, 1)),
        # linear in speed
        (400 * G, "nvidia", 9216, EcnThresholds(600_000, 6_000_000, 100)),
        (40 * G, "nvidia", 1500, EcnThresholds(60_000, 600_000, 100)),
        (100 * G, "dcqcn-paper", 1500, EcnThresholds(12_500, 500_000, 1)),
        # lab speeds: floors of 2 MTU (min) and min + 2 MTU (max)
        (10 * M, "nvidia", 1500, EcnThresholds(3_000, 6_000, 100)),
        (100 * M, "nvidia", 1500, EcnThresholds(3_000, 6_000, 100)),
        (10 * G, "nvidia", 9216, EcnThresholds(18_432, 150_000, 100)),
    ],
)
def test_ecn_thresholds(
    speed_bps: int, profile: EcnProfile, mtu: int, expected: EcnThresholds
) -> None:
    assert ecn_thresholds(speed_bps, mtu=mtu, profile=profile) == expected


@pytest.mark.parametrize("speed_bps", [10 * M, 100 * M])
def test_lab_ecn_fits_below_lab_headroom(speed_bps: int) -> None:
    xoff = pfc_headroom(speed_bps, 2, 1500).xoff
    got = ecn_thresholds_below_xoff(speed_bps, xoff, 1500)
    assert got == EcnThresholds(xoff - 1500 - 1500, xoff - 1500, 100)
    assert 1500 < got.min_bytes < got.max_bytes < xoff


def test_ecn_below_xoff_keeps_unconstrained_values_when_they_fit() -> None:
    assert ecn_thresholds_below_xoff(100 * G, 10_000_000, 9216) == ecn_thresholds(100 * G, mtu=9216)


def test_dcqcn_nic_defaults() -> None:
    assert dcqcn_nic_defaults() == {
        "clamp_tgt_rate": 0,
        "clamp_tgt_rate_after_time_inc": 1,
        "rpg_time_reset": 300,
        "rpg_byte_reset": 32767,
        "rpg_ai_rate": 5,
        "rpg_hai_rate": 50,
        "rpg_gd": 11,
        "rpg_min_dec_fac": 50,
        "rpg_min_rate": 1,
        "dce_tcp_g": 1019,
        "rate_reduce_monitor_period": 4,
        "initial_alpha_value": 1023,
        "min_time_between_cnps": 4,
        "cnp_dscp": 48,
        "cnp_802p_prio": 6,
    }
    assert DCQCN_NIC_UNITS.keys() == dcqcn_nic_defaults().keys()


def test_dcqcn_nic_defaults_returns_a_fresh_dict() -> None:
    first = dcqcn_nic_defaults()
    first["cnp_dscp"] = 0
    assert dcqcn_nic_defaults()["cnp_dscp"] == 48


# Speeds from lab (10 Mb/s) to 800 Gb/s, whole Mb/s.
speeds = st.integers(min_value=10, max_value=800_000).map(lambda mbps: mbps * M)
cables = st.floats(min_value=0, max_value=100_000, allow_nan=False)
mtus = st.integers(min_value=576, max_value=9216)


@given(speed=speeds, cable_a=cables, cable_b=cables, mtu=mtus)
def test_headroom_monotonic_in_cable_length(
    speed: int, cable_a: float, cable_b: float, mtu: int
) -> None:
    short, long_ = sorted((cable_a, cable_b))
    assert pfc_headroom(speed, short, mtu).xoff <= pfc_headroom(speed, long_, mtu).xoff


@given(speed_a=speeds, speed_b=speeds, cable=cables, mtu=mtus)
def test_headroom_monotonic_in_speed(speed_a: int, speed_b: int, cable: float, mtu: int) -> None:
    slow, fast = sorted((speed_a, speed_b))
    assert pfc_headroom(slow, cable, mtu).xoff <= pfc_headroom(fast, cable, mtu).xoff


@given(speed=speeds, cable=cables, mtu=mtus)
def test_headroom_is_sane(speed: int, cable: float, mtu: int) -> None:
    got = pfc_headroom(speed, cable, mtu, model=SPECTRUM1)
    assert got.xoff > mtu  # at least the frame in flight when XOFF goes out
    assert got.xon >= mtu
    assert got.size >= got.xoff + got.xon
    assert got.xoff % 1024 == got.xon % 1024 == got.size % 1024 == 0


@given(speed=speeds, cable=st.floats(min_value=0, max_value=300), mtu=mtus)
def test_ecn_below_xoff_rule(speed: int, cable: float, mtu: int) -> None:
    xoff = pfc_headroom(speed, cable, mtu).xoff
    if xoff < 3 * mtu:
        with pytest.raises(ValueError, match="xoff"):
            ecn_thresholds_below_xoff(speed, xoff, mtu)
        return
    got = ecn_thresholds_below_xoff(speed, xoff, mtu)
    assert got.max_bytes <= xoff - mtu
    assert got.min_bytes >= mtu
    assert got.max_bytes - got.min_bytes >= mtu


@given(speed_a=speeds, speed_b=speeds, mtu=mtus)
def test_ecn_thresholds_floors_and_monotonic(speed_a: int, speed_b: int, mtu: int) -> None:
    slow, fast = sorted((speed_a, speed_b))
    low, high = ecn_thresholds(slow, mtu=mtu), ecn_thresholds(fast, mtu=mtu)
    assert low.min_bytes >= 2 * mtu
    assert low.max_bytes >= low.min_bytes + 2 * mtu
    assert low.min_bytes <= high.min_bytes
    assert low.max_bytes <= high.max_bytes
