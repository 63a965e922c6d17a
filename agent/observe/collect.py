"""Collect what the checks look at: each switch's state and two counter snapshots, and, when
asked (``hosts=True``), each RDMA host's pre-flight facts.

One SSH session per device reads the state and a first counter snapshot, waits the window,
and reads the second snapshot, so rates (pauses per second) and deltas (drops during the
window) come from the same session. Devices are read in parallel; an unreachable device is
recorded with the reason, and the checks skip it.

Hosts: the sources of :data:`agent.observe.hostsources.PREFLIGHT_SOURCES` are run on every
host whose ports declare an ``rdma_device`` (:func:`agent.observe.hostfacts.collect_many`, the
same fan-out); the host checks RC202-RC207 judge them. The NIC's trust, DSCP map and PFC are read
there (mlnx_qos or dcb), not through the ``linux_host`` platform's ``read_state``: a host's
``state`` stays unset, so RC201 (which judges that state) says where they are checked instead
of judging them a second time (docs/host-preflight.md, "RC201").
"""

from __future__ import annotations

import time
from typing import TypedDict, Unpack

from agent.device.failures import failure_of
from agent.device.fanout import DEFAULT_PARALLELISM, results_or_raise, run_each
from agent.device.platforms import platform_for
from agent.device.push import Pusher, Unreachable, close_quietly, connect
from agent.intent.model import Device
from agent.observe.checks.base import Collected, DeviceData
from agent.observe.hostfacts import HostFacts, collect_many
from agent.observe.hostsources import PREFLIGHT_SOURCES

# Why a host has no NIC state for RC201 (see the module docstring).
HOST_STATE_ELSEWHERE = (
    "NIC trust, DSCP map and PFC are read as host facts and judged by RC203 and RC204"
)


def collect_device(
    pusher: Pusher, device: Device, counters: bool, window_s: float, links: bool = False
) -> DeviceData:
    device_plan = pusher.plan.device(device.name)
    assert device_plan is not None
    data = DeviceData(device, device_plan)
    platform = platform_for(device.platform)
    try:
        conn = connect(device, platform)
    except Unreachable as exc:
        data.error = str(exc)
        return data
    try:
        data.sessions = platform.read_sessions(conn)
        data.state = platform.read_state(conn)
        if counters:
            data.previous = platform.read_counters(conn, data.state)
            if window_s > 0:
                time.sleep(window_s)
                data.counters = platform.read_counters(conn, data.state)
            else:
                data.counters, data.previous = data.previous, None
        if links:
            data.links = platform.read_link_health(conn)
    except Exception as exc:  # a parse or protocol error on one device must not stop the rest
        data.error = str(failure_of(device.name, exc))
    finally:
        close_quietly(conn)
    return data


class CollectOptions(TypedDict, total=False):
    """:func:`collect`'s devices read at once (the fan-out's default) and whether the hosts'
    pre-flight facts are read too (no)."""

    parallelism: int
    hosts: bool


def collect(
    pusher: Pusher,
    devices: list[Device],
    counters: bool = True,
    window_s: float = 0.0,
    **options: Unpack[CollectOptions],
) -> Collected:
    """State (and counters) of ``devices``; hosts are listed without state, with their host
    facts when ``hosts`` (every host of the intent with an RDMA port)."""
    parallelism = options.get("parallelism", DEFAULT_PARALLELISM)
    collected = Collected(pusher.intent, pusher.plan)
    switches = [d for d in devices if d.role != "host"]
    read = run_each(
        {d.name: d for d in switches},
        lambda d: collect_device(pusher, d, counters, window_s),
        parallelism,
    )
    for data in results_or_raise(read).values():
        collected.devices[data.device.name] = data
    facts = host_facts(pusher, parallelism) if options.get("hosts", False) else {}
    for device in pusher.intent.devices:
        if device.role == "host":
            device_plan = pusher.plan.device(device.name)
            assert device_plan is not None
            collected.devices[device.name] = DeviceData(
                device,
                device_plan,
                error="lab host: no RoCE NIC to read" if device.netns else HOST_STATE_ELSEWHERE,
                facts=facts.get(device.name),
            )
    return collected


def host_facts(pusher: Pusher, parallelism: int) -> dict[str, HostFacts]:
    """The pre-flight facts of every host of the intent that has an RDMA port."""
    rdma_hosts = [d for d in pusher.intent.devices if d.role == "host" and d.rdma_ports()]
    if not rdma_hosts:
        return {}
    return collect_many(
        rdma_hosts, pusher.intent, sources=PREFLIGHT_SOURCES, parallelism=parallelism
    )
