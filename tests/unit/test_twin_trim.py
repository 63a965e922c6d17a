"""Packet trimming in the twin (issue #47): a 16:1 incast at 400 G trims instead of pausing in
lossy-trim and pauses in lossless; the plan's trimming reaches the switch ports; spraying and
adaptive routing reorder only where there are several paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.twin.engine import Engine
from agent.twin.flows import FlowSpec
from agent.twin.network import TwinError, TwinNetwork, leaf_spine_fabric_yaml, load_network
from agent.twin.run_options import Paths, Recovery
from agent.twin.trimming import TRIM_RECEIVER, percentile, trim_facts

DATA = Path(__file__).resolve().parents[1] / "data" / "twin"
INCAST_400G = DATA / "incast-400g.yml"
LEAF_SPINE_400G = DATA / "leaf-spine-400g.yml"
MESSAGE = 2_000_000


def _incast(
    network: TwinNetwork, senders: int, recovery: Recovery, paths: Paths = "flow"
) -> Engine:
    """``senders`` hosts each post one message to the last host; run until all are in."""
    receiver = f"h{len(network.hosts)}"
    specs = [FlowSpec(f"h{i}", receiver, size_bytes=MESSAGE) for i in range(1, senders + 1)]
    done: list[int] = []

    def on_message(engine: Engine, *_: object) -> None:
        done.append(1)
        if len(done) == senders:
            engine.finish()

    engine = Engine(network, specs, recovery=recovery, paths=paths, on_message=on_message)
    engine.run(0.01)
    return engine


def _pfc_frames(engine: Engine) -> int:
    return sum(p.pfc_tx_xoff + p.pfc_tx_xon for p in engine.ports)


# (mode, recovery, paths): what the Done-when asks of each.
INCAST_CASES: list[tuple[str, Recovery, Paths]] = [
    ("lossless", "go-back-n", "flow"),
    ("lossy-trim", "selective-repeat", "flow"),
    ("lossy-trim", "selective-repeat", "spray"),
]


@pytest.mark.parametrize(("mode", "recovery", "paths"), INCAST_CASES)
def test_16_to_1_incast_at_400g(mode: str, recovery: Recovery, paths: Paths) -> None:
    network = load_network(INCAST_400G, mode)
    assert network.mode == mode
    engine = _incast(network, 16, recovery, paths)
    facts = trim_facts(engine)
    assert all(f.messages_done == 1 for f in engine.flows), "every message completes"
    assert sum(f.delivered_bytes for f in engine.flows) > 16 * MESSAGE
    assert facts.completion_max_s is not None
    if mode == "lossless":
        assert _pfc_frames(engine) > 0, "lossless pauses"
        assert facts.trimmed == 0
        assert facts.trim_receiver is None
    else:
        assert _pfc_frames(engine) == 0, "lossy-trim never pauses"
        assert facts.trimmed > 0
        assert facts.retransmitted >= facts.trimmed - facts.trim_dropped
        assert facts.trim_receiver == TRIM_RECEIVER
        # The trimmed frames rode the trim queue (the CNP class's strict queue) to the host.
        assert sum(f.trims_rx for f in engine.flows) == facts.trimmed - facts.trim_dropped


def test_the_plan_trims_on_switch_ports_only_in_lossy_trim() -> None:
    trim = load_network(INCAST_400G, "lossy-trim")
    port = trim.switches["leaf1"].ports[0]
    assert port.qos is not None and port.qos.trim is not None
    assert not port.qos.pfc_enabled
    sizes = port.qos.trim_sizes()
    assert sizes[3] == port.qos.trim.size_bytes and sum(1 for s in sizes if s) == 1
    lossless = load_network(INCAST_400G, "lossless")
    port = lossless.switches["leaf1"].ports[0]
    assert port.qos is not None and port.qos.trim is None and port.qos.pfc_enabled
    assert load_network(INCAST_400G).mode == "lossless"


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"paths": "sideways"}, "--paths"),
        ({"paths": "spray", "recovery": "go-back-n"}, "selective-repeat"),
    ],
)
def test_bad_path_choice_names_the_option(kwargs: dict[str, str], says: str) -> None:
    network = load_network(INCAST_400G)
    with pytest.raises(TwinError, match=says):
        Engine(network, [FlowSpec("h1", "h2", size_bytes=1000)], **kwargs)  # type: ignore[arg-type]


def test_bad_mode_names_the_option() -> None:
    with pytest.raises(TwinError, match="--mode"):
        load_network(INCAST_400G, "lossy")


@pytest.fixture(scope="module")
def leaf_spine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trim") / "leaf-spine.yml"
    path.write_text(leaf_spine_fabric_yaml(["100G", "100G"], 4, uplink_speed="100G"))
    return path


# (fabric, paths, several paths between the hosts): reordering only with several paths.
REORDER_CASES: list[tuple[str, Paths, bool]] = [
    ("star", "spray", False),
    ("star", "adaptive", False),
    ("leaf-spine", "flow", True),
    ("leaf-spine", "spray", True),
    ("leaf-spine", "adaptive", True),
]


@pytest.mark.parametrize(("fabric", "paths", "multipath"), REORDER_CASES)
def test_spraying_reorders_only_over_several_paths(
    fabric: str, paths: Paths, multipath: bool, leaf_spine: Path
) -> None:
    # Lossless: nothing is trimmed or lost, so every frame held out of order is reordering.
    network = load_network(INCAST_400G if fabric == "star" else leaf_spine, "lossless")
    senders = 4
    receiver = f"h{len(network.hosts)}"
    specs = [FlowSpec(f"h{i}", receiver, size_bytes=MESSAGE) for i in range(1, senders + 1)]
    engine = Engine(network, specs, recovery="selective-repeat", paths=paths)
    engine.run(0.002)
    facts = trim_facts(engine)
    assert all(f.messages_done == 1 for f in engine.flows)
    assert facts.retransmitted == 0
    if paths != "flow" and multipath:
        assert facts.reorder_depth > 0
    else:
        assert facts.reorder_depth == 0


@pytest.mark.parametrize(
    ("values", "fraction", "expected"),
    [([5], 0.99, 5), ([1, 2, 3, 4], 0.5, 2), (list(range(1, 101)), 0.99, 99), ([3, 1], 1.0, 3)],
)
def test_percentile_nearest_rank(values: list[int], fraction: float, expected: int) -> None:
    assert percentile(values, fraction) == expected
