"""A twin that tells you what to do: the verdict table, the bottleneck it names, durations with
their unit, the progress bar, and a plot that shows the onset, the thresholds and the flows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent.app.tune import tune_command
from agent.app.twin import twin_command
from agent.twin.network import TwinNetwork, load_network, star_fabric_yaml
from agent.twin.plot import build_figure
from agent.twin.results import PortReport, pick_bottleneck, run_twin
from agent.twin.verdicts import RunFacts, judge
from agent.twin.workloads import ScenarioName
from common.clicktypes import Duration
from tests.unit.twin_fabrics import POD_400G, star

# ------------------------------------------------------------------------------ the table

HEALTHY = RunFacts(
    scenario="incast",
    speed_bps=100_000_000_000,
    lossless_drops=0,
    worst_drop_port=None,
    storms_detected=0,
    storm_port=None,
    bottleneck="leaf1:Ethernet1",
    bottleneck_speed_bps=100_000_000_000,
    utilisation=0.97,
    queue_p99_bytes=50_000,
    ecn_max_bytes=200_000,
    most_paused=("h2", 0.0),
    cnps_received=100,
    rate_cuts=90,
    jain=0.99,
    incast_goodput_bps=(24e9, 25e9),
    victim=None,
    ecn_enabled=True,
    dcqcn={"rpg_ai_rate": 5, "rpg_time_reset": 300},
)

# (what differs from a healthy run, the verdict, a word of what it says)
TABLE: list[tuple[dict[str, object], str, str]] = [
    ({}, "healthy", "no loss"),
    ({"lossless_drops": 3, "worst_drop_port": "leaf1:Ethernet2"}, "lossless-loss", "headroom"),
    ({"scenario": "storm", "storms_detected": 1, "storm_port": "leaf1:Ethernet1"},
     "storm-contained", "watchdog at leaf1:Ethernet1"),
    ({"scenario": "storm", "most_paused": ("leaf1:Ethernet1", 0.8)}, "storm-uncontained",
     "enable the PFC watchdog"),
    ({"victim": ("h4->h5:1", 1e9, 0.4, 0.0)}, "victim-starved", "head-of-line"),
    ({"victim": ("h4->h5:1", 1e9, 0.0, 0.3)}, "victim-starved", "ECN marks"),
    ({"victim": ("h4->h5:1", 60e9, 0.4, 0.0)}, "healthy", "no loss"),
    ({"utilisation": 0.08}, "under-utilised", "tune --dcqcn"),
    ({"utilisation": 0.08, "most_paused": ("spine1:Ethernet1", 0.3)}, "under-utilised",
     "PFC also paused spine1:Ethernet1"),
    ({"utilisation": 0.08, "dcqcn": None}, "under-loaded", "offered less"),
    ({"most_paused": ("h2", 0.5)}, "pfc-bound", "do not keep the queues"),
    ({"most_paused": ("h2", 0.5), "ecn_enabled": False, "cnps_received": 0}, "pfc-bound",
     "ECN is off"),
    ({"utilisation": 0.5, "cnps_received": 0}, "under-loaded", "offered less"),
    ({"jain": 0.4}, "unfair", "Jain 0.40"),
    ({"queue_p99_bytes": 900_000}, "queue-above-ecn", "900 KB"),
    ({"queue_p99_bytes": 900_000, "ecn_max_bytes": None}, "healthy", "no loss"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "kind", "says"), TABLE)
def test_the_verdict_table(change: dict[str, object], kind: str, says: str) -> None:
    verdict = judge(dataclasses.replace(HEALTHY, **change))  # type: ignore[arg-type]
    assert verdict.kind == kind
    assert says in verdict.says


def test_the_under_utilised_verdict_names_the_speed_and_the_knobs() -> None:
    says = judge(dataclasses.replace(HEALTHY, utilisation=0.08)).says
    assert "8.0% of 100G" in says and "rpg_ai_rate 5 Mb/s per 300 us" in says


# ------------------------------------------------------------------------------ runs


@pytest.fixture(scope="module")
def pod() -> TwinNetwork:
    return load_network(POD_400G)


def _storm_star(tmp_path: Path, watchdog: str) -> TwinNetwork:
    return star(tmp_path, 4, "25G", profile="pfc-only", overrides=f"pfc: {{watchdog: {watchdog}}}")


# (fabric, scenario, senders, duration, the verdict)
RUNS: list[tuple[str, ScenarioName, int, float, str]] = [
    # mlx5 default DCQCN at 400G: cut hard at the onset, recovering at 5 Mb/s per 300 us.
    ("pod", "incast", 8, 2e-3, "under-utilised"),
    ("pod", "all-to-all", 4, 0.3e-3, "healthy"),
    ("pfc-only", "incast", 4, 1e-3, "pfc-bound"),
    ("pfc-only-pod", "victim", 4, 1e-3, "victim-starved"),
    ("storm-watched", "storm", 1, 0, "storm-contained"),
    ("storm-unwatched", "storm", 1, 5e-3, "storm-uncontained"),
]


@pytest.mark.parametrize(("fabric", "scenario", "senders", "duration", "kind"), RUNS)
def test_runs_get_their_verdict(
    pod: TwinNetwork,
    tmp_path: Path,
    fabric: str,
    scenario: ScenarioName,
    senders: int,
    duration: float,
    kind: str,
) -> None:
    nets = {
        "pod": lambda: pod,
        "pfc-only": lambda: star(tmp_path, 5, "100G", profile="pfc-only"),
        "pfc-only-pod": lambda: _pfc_only_pod(tmp_path),
        "storm-watched": lambda: _storm_star(
            tmp_path, "{action: drop, detection_ms: 10, polling_ms: 10, restoration_ms: 20}"
        ),
        "storm-unwatched": lambda: _storm_star(tmp_path, "{enabled: false}"),
    }
    result = run_twin(nets[fabric](), scenario, senders=senders, duration_s=duration or 1e-3)
    assert result.verdict.kind == kind, result.verdict.says


def _pfc_only_pod(tmp_path: Path) -> TwinNetwork:
    path = tmp_path / "pod-pfc-only.yml"
    path.write_text(POD_400G.read_text().replace("profile: nvidia-default", "profile: pfc-only"))
    return load_network(path)


def test_a_run_that_loses_lossless_frames_says_so(tmp_path: Path) -> None:
    net = star(tmp_path, 5, "100G", profile="pfc-only")
    result = run_twin(net, "incast", senders=4, duration_s=0.5e-3, ignore_pause=True)
    assert result.verdict.kind == "lossless-loss"
    # Headroom is ingress accounting: the loss is on the port a sender's frames came in on.
    assert "most at leaf1:Ethernet" in result.verdict.says and "ingress" in result.verdict.says


# ------------------------------------------------------------------------------ the bottleneck


def _port(name: str, utilisation: float, p99: int, peak: int = 0) -> PortReport:
    return PortReport(name, 400_000_000_000, utilisation, peak or p99, p99,
                      0, 0, 0, 0.0, 0, 0, 0, 0, 0, 0)  # fmt: skip


# (ports, storm port, the bottleneck)
BOTTLENECKS: list[tuple[list[PortReport], str | None, str | None]] = [
    # The case: a port with a deep queue but little traffic is not the bottleneck.
    ([_port("spine2:Ethernet1/1", 0.052, 3_000_000), _port("leaf1:swp1", 0.955, 20_000)],
     None, "leaf1:swp1"),
    # All-to-all fills many ports: among the busiest, the deepest queue.
    ([_port("a", 1.0, 20_000), _port("b", 0.995, 25_000), _port("c", 1.0, 21_000)], None, "b"),
    # At low utilisation a tie is relative: 7.6 % is not a tie with 10.4 %.
    ([_port("receiver", 0.104, 2_400_000), _port("uplink", 0.076, 3_600_000)], None, "receiver"),
    # The storm: the port facing the stormer, where the pause holds the traffic.
    ([_port("busy", 0.5, 0), _port("facing", 0.0, 29_000)], "facing", "facing"),
    ([], None, None),
]  # fmt: skip


@pytest.mark.parametrize(("ports", "storm", "name"), BOTTLENECKS)
def test_the_bottleneck_is_the_busiest_port(
    ports: list[PortReport], storm: str | None, name: str | None
) -> None:
    picked = pick_bottleneck(ports, storm)
    assert (picked.port if picked else None) == name


def test_the_victim_runs_bottleneck_is_the_receivers_port(pod: TwinNetwork) -> None:
    result = run_twin(pod, "victim", senders=4, duration_s=1e-3)
    receiver = pod.hosts["gpu01"]
    assert result.bottleneck == f"{receiver.leaf}:{receiver.port.peer_port}"
    assert result.bottleneck_utilisation == max(p.utilisation for p in result.ports)


# ------------------------------------------------------------------------------ the commands


def _twin(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(twin_command, list(args))
    return result.exit_code, result.stdout, result.stderr


def _tune(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(tune_command, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_table_ends_with_the_verdict() -> None:
    code, out, err = _twin(str(POD_400G), "--senders", "4", "--duration", "300us")
    assert code == 0, err
    assert out.rstrip().splitlines()[-1].startswith("verdict: ")
    assert "bottleneck (busiest port)" in out


def test_the_json_carries_the_verdict_and_the_thresholds() -> None:
    code, out, _ = _twin(str(POD_400G), "--senders", "4", "--duration", "300us", "--output", "json")
    data = json.loads(out)
    assert code == 0 and data["verdict"]["kind"] and data["verdict"]["says"]
    series = data["series"]
    assert series["ecn_min_bytes"] < series["ecn_max_bytes"] and series["pause_threshold_bytes"]
    assert len(series["queue_port_bps"]) == len(series["t_s"])
    assert data["dcqcn"]["rpg_ai_rate"] > 0


COMMANDS: list[tuple[str, click.Command]] = [("twin", twin_command), ("tune", tune_command)]


@pytest.mark.parametrize(("name", "command"), COMMANDS)
def test_every_duration_option_wants_a_unit(name: str, command: click.Command) -> None:
    """Each duration option of twin and tune: a bare number exits 2, naming the option and the
    units it takes (``--duration 10`` ran ten seconds where ten milliseconds were meant)."""
    options = [p for p in command.params if isinstance(p, click.Option)]
    durations = [p for p in options if isinstance(p.type, Duration)]
    assert durations, name
    timed = [p for p in options if any(w in (p.name or "") for w in ("duration", "time", "_s"))]
    assert set(timed) <= set(durations), [p.name for p in timed]
    invoke = _twin if name == "twin" else _tune
    for option in durations:
        flag = option.opts[0]
        code, _, err = invoke(str(POD_400G), flag, "10")
        assert code == 2, err
        assert f"'{flag}'" in err and "s, ms, us or ns" in err and "Actual: '10'" in err


# (value, seconds or None for refused)
DURATIONS = [
    ("10ms", 10e-3), ("2s", 2.0), ("250us", 250e-6), ("250µs", 250e-6), (" 1.5 ms ", 1.5e-3),
    ("100ns", 100e-9), (".5s", 0.5), ("10", None), ("0ms", None), ("11s", None), ("ms", None),
    ("1e3ms", None), ("-1ms", None), ("10 minutes", None),
]  # fmt: skip


@pytest.mark.parametrize(("value", "seconds"), DURATIONS)
def test_duration_values(value: str, seconds: float | None) -> None:
    if seconds is None:
        with pytest.raises(ValueError, match="Expected: "):
            Duration(10.0).parse(value)
    else:
        assert Duration(10.0).parse(value) == pytest.approx(seconds)


def test_progress_when_asked_and_not_otherwise() -> None:
    args = [str(POD_400G), "--senders", "2", "--duration", "200us"]
    code, _, err = _twin(*args, "--progress")
    assert code == 0 and "ms simulated" in err
    for quiet in ([], ["--no-progress"]):
        code, _, err = _twin(*args, *quiet)
        assert code == 0 and "simulated" not in err  # not a terminal: no bar unless asked


def test_tune_shows_its_runs_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "star.yml"
    path.write_text(star_fabric_yaml(5, "40G"))
    code, _, err = _tune(
        str(path), "--objective", "queue", "--senders", "2", "--duration", "1ms",
        "--candidates", "4", "--seeds", "1", "--progress",
    )  # fmt: skip
    assert code in (0, 1), err
    assert "runs" in err and "tune 40G" in err


# ------------------------------------------------------------------------------ the plot


def _legend(ax: object) -> list[str]:
    legend = ax.get_legend()  # type: ignore[attr-defined]
    return [t.get_text() for t in legend.get_texts()] if legend else []


def test_the_plot_shows_onset_thresholds_and_flows(pod: TwinNetwork) -> None:
    from matplotlib import pyplot as plt

    result = run_twin(pod, "incast", senders=16, duration_s=2e-3)
    fig = build_figure(result)
    try:
        queue, sent, rates, _ = fig.axes
        assert all(ax.get_xscale() == "log" for ax in fig.axes)
        # The onset is sampled: several samples before the first regular interval.
        every = result.series.every_s
        assert sum(1 for t in result.series.t_s if 0 < t < every) >= 5
        labels = " ".join(_legend(queue))
        assert "ECN min 150 KB" in labels and "ECN max 1.5 MB" in labels
        assert "pause threshold" in labels
        assert "line rate 400G" in " ".join(_legend(sent))
        rate_labels = " ".join(_legend(rates))
        assert "median of 16 flows" in rate_labels and "min-max of 16 flows" in rate_labels
        assert "fair share at the bottleneck 25 Gb/s (16 flows)" in rate_labels
        assert "verdict: " in fig.texts[0].get_text()
    finally:
        plt.close(fig)


def test_a_few_flows_each_get_a_line_and_a_name(pod: TwinNetwork) -> None:
    from matplotlib import pyplot as plt

    result = run_twin(pod, "victim", senders=3, duration_s=0.5e-3)
    fig = build_figure(result)
    try:
        labels = _legend(fig.axes[2])
        assert sum(1 for label in labels if "→" in label) == 4
        assert any(label.endswith("(victim)") for label in labels)
    finally:
        plt.close(fig)
