"""Every metric the exporter serves: name, type, labels, meaning and where the value comes from.

One table, used three ways: the collector builds its metric families from it (so a name or a
label cannot differ between code and documentation), ``exporters/METRICS.md`` is generated
from it (``python -m exporters.metrics > exporters/METRICS.md``; a unit test fails when the
file is stale), and the tests check every dashboard and alert expression against it.

Conventions (Prometheus naming best practices): prefix ``roce_``, base units (seconds, bytes),
``_total`` on counters, ``_info`` on constant-1 gauges that carry labels, bounded label values
(device, interface and host names from the fabric file, priorities 0-7, fixed enums).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

MetricType = Literal["counter", "gauge", "histogram"]

PRIORITY_LABEL_VALUES = tuple(str(p) for p in range(8))
DIRECTIONS = ("rx", "tx")
# reset, stale, oversized, unsupported: gNMI streams (exporters/telemetry.py) -- cut after
# they were up, samples older than allowed, a message over the size limit, a NOS or device
# the gNMI transport cannot serve.
POLL_ERROR_REASONS = (
    "timeout", "auth", "connect", "parse", "other", "reset", "stale", "oversized", "unsupported",
)  # fmt: skip
TELEMETRY_TRANSPORTS = ("gnmi", "ssh")
# What the exporter knows of a switch: read by its latest poll, no poll finished yet, or why
# the latest poll failed. Every figure about a switch is absent until it was read once; this
# says why one is absent.
DEVICE_STATES = ("up", "not_polled_yet", *POLL_ERROR_REASONS)
# unverified: the device could not be read, so the check could not judge it (a check
# about it is neither a pass nor a finding); skipped: the check does not apply.
CHECK_RESULTS = ("pass", "fail", "error", "unverified", "skipped")
PROBE_SCENARIOS = ("pairwise", "incast", "storm", "receive", "other")
PROBE_RESULTS = ("pass", "fail")
NIC_ERROR_SOURCES = ("sysfs", "ethtool")
YES_NO = ("yes", "no")
LOCATE_KINDS = ("link", "port", "switch", "host-nic", "host")
# Why an HTTP connection was refused (503), cut, or failed; exporters/server.py counts them.
HTTP_BAD_CLIENT_REASONS = (
    "connection_cap", "address_cap", "response_cap",
    "header_deadline", "response_deadline", "evicted", "slow_reader",
    "bad_request", "tls_handshake", "disconnected",
)  # fmt: skip

# Source commands, quoted in the table and in METRICS.md.
EOS_PFC = "EOS `show priority-flow-control counters | json`"
EOS_QUEUE = "EOS `show interfaces counters queue | json` (TCn, DP0)"
EOS_ECN = "EOS `show qos interfaces ecn counters queue | json`"
EOS_DROPS = "EOS `show interfaces counters queue drops | json` (ingress VOQ)"
EOS_WATCHDOG = "EOS `show priority-flow-control counters watchdog | json`"
SONIC_WATERMARK = "SONiC `show queue watermark unicast` (platforms that report it)"
HW_COUNTERS = "`/sys/class/infiniband/DEV/ports/N/hw_counters/{counter}`"
ETHTOOL = "`ethtool -S IF` (mlx5 per-priority port counters)"


@dataclass(frozen=True)
class MetricSpec:
    name: str  # full exposition name, with _total for counters
    type: MetricType
    labels: tuple[str, ...]
    help: str
    source: str
    group: str

    @property
    def family_name(self) -> str:
        """prometheus_client's family name: counters without the ``_total`` suffix."""
        return self.name.removesuffix("_total") if self.type == "counter" else self.name


FABRIC_LABEL = "fabric"


@dataclass(frozen=True)
class _Group:
    """Makes the specs of one group of metrics (a table of METRICS.md)."""

    name: str

    def __call__(
        self, name: str, kind: MetricType, labels: tuple[str, ...], text: str, source: str
    ) -> MetricSpec:
        # Every series carries the fabric's name, so two fabrics feeding one Prometheus stay
        # apart.
        return MetricSpec(name, kind, (FABRIC_LABEL, *labels), text, source, self.name)


_switch, _compliance, _probes, _nic, _agent = map(
    _Group, ("switch", "compliance", "probes", "nic", "agent")
)


IFACE = ("device", "interface")
FLOW = ("scenario", "src", "dst")

MLX5_SRC = "drivers/infiniband/hw/mlx5/counters.c"
RXE_SRC = "drivers/infiniband/sw/rxe/"
NIC_KINDS = ("mlx5", "rxe")


@dataclass(frozen=True)
class NicCounter:
    """One RDMA hw_counters file: what it counts, which drivers have it and where the kernel
    counts it (the names are the files' names, as agent.observe.hostnic reads them)."""

    name: str
    help: str
    nics: tuple[str, ...]  # of NIC_KINDS
    kernel: str
    exported: bool = True


# Every counter agent.observe.hostnic reads (exported as roce_nic_<name>_total), then the files of
# the
# same directory it leaves alone, with why. Kernel sources: mlx5 names its counters in
# drivers/infiniband/hw/mlx5/counters.c, each group only with a firmware capability; rxe names
# its set in drivers/infiniband/sw/rxe/rxe_hw_counters.c and counts each where noted.
NIC_COUNTERS: tuple[NicCounter, ...] = (
    NicCounter("np_cnp_sent",
               "CNPs this NIC sent as notification point (it received CE-marked RoCE packets).",
               ("mlx5",), f"{MLX5_SRC} `cong_cnts` (capability `cc_query_allowed`)"),
    NicCounter("np_ecn_marked_roce_packets",
               "RoCE packets received CE-marked (the switches' ECN marks reaching this host).",
               ("mlx5",), f"{MLX5_SRC} `cong_cnts`"),
    NicCounter("rp_cnp_handled",
               "CNPs this NIC handled as reaction point (DCQCN cut its rate).",
               ("mlx5",), f"{MLX5_SRC} `cong_cnts`"),
    NicCounter("rp_cnp_ignored",
               "CNPs received and ignored (congestion control not enabled for the priority).",
               ("mlx5",), f"{MLX5_SRC} `cong_cnts`"),
    NicCounter("out_of_sequence",
               "Out-of-sequence packets received (a sign of loss in the fabric).",
               ("mlx5",), f"{MLX5_SRC} `out_of_seq_q_cnts` (capability `out_of_seq_cnt`)"),
    NicCounter("packet_seq_err",
               "NAK sequence error packets received (the peer saw a PSN gap).",
               ("mlx5",),
               f"{MLX5_SRC} `retrans_q_cnts` (capability `retransmission_q_counters`)"),
    NicCounter("rcvd_seq_err",
               "NAKs 'PSN sequence error' received as requester: the peer saw a gap, a packet "
               "was lost on the way (rxe's counterpart of packet_seq_err).",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `check_ack`"),
    NicCounter("out_of_seq_request",
               "Requests received with a PSN past the expected one (a loss in the fabric), "
               "once per NAK sent (rxe's counterpart of out_of_sequence).",
               ("rxe",), f"{RXE_SRC}rxe_resp.c `check_psn`"),
    NicCounter("duplicate_request",
               "Requests received with a PSN already seen: retransmissions reaching the "
               "responder.",
               ("mlx5", "rxe"), f"{MLX5_SRC} `retrans_q_cnts`; {RXE_SRC}rxe_resp.c `check_psn`"),
    NicCounter("completer_retry_err",
               "Retransmissions started as requester (after a sequence NAK or an ACK timeout).",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `rxe_completer` (COMPST_ERROR_RETRY)"),
    NicCounter("retry_exceeded_err",
               "Work requests failed because the retransmissions ran out (the QP went to "
               "error): loss the transport could not hide.",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `rxe_completer` (IB_WC_RETRY_EXC_ERR)"),
    NicCounter("rcvd_rnr_err",
               "RNR NAKs received: the peer had no receive buffer posted (a slow host, not the "
               "fabric).",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `check_ack`"),
    NicCounter("send_rnr_err",
               "RNR NAKs sent: this host had no receive buffer posted.",
               ("rxe",), f"{RXE_SRC}rxe_resp.c `rxe_responder` (RESPST_ERR_RNR)"),
    NicCounter("retry_rnr_exceeded_err",
               "Work requests failed after the RNR retries ran out.",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `rxe_completer` (IB_WC_RNR_RETRY_EXC_ERR)"),
    NicCounter("send_err",
               "Packets the RDMA device could not hand to its netdev.",
               ("rxe",), f"{RXE_SRC}rxe_net.c `rxe_xmit_packet`"),
    NicCounter("link_downed",
               "Times the RDMA port went down (netdev down or carrier lost).",
               ("rxe",), f"{RXE_SRC}rxe_net.c `rxe_port_down`"),
    NicCounter("sent_pkts",
               "RoCE packets sent.",
               ("rxe",), f"{RXE_SRC}rxe_net.c `rxe_xmit_packet`"),
    NicCounter("rcvd_pkts",
               "RoCE packets received that passed the header and ICRC checks (a corrupted "
               "packet is not counted).",
               ("rxe",), f"{RXE_SRC}rxe_recv.c `rxe_rcv`"),
    NicCounter("rdma_sends",
               "SEND work requests completed.",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `do_complete`"),
    NicCounter("rdma_recvs",
               "Receive work requests completed successfully.",
               ("rxe",), f"{RXE_SRC}rxe_resp.c `do_complete`"),
    NicCounter("ack_deferred",
               "Not exported: responses the completer handled deferred because others were "
               "queued (CPU scheduling, not the network).",
               ("rxe",), f"{RXE_SRC}rxe_comp.c `rxe_comp_queue_pkt`", exported=False),
    NicCounter("lifespan",
               "Not a counter: how long (ms) the kernel caches the counters between driver "
               "reads.",
               ("mlx5", "rxe"), "drivers/infiniband/core/sysfs.c `show_stats_lifespan`",
               exported=False),
)  # fmt: skip


def _nic_counter_specs() -> tuple[MetricSpec, ...]:
    """``roce_nic_<counter>_total`` for every exported :data:`NIC_COUNTERS` entry."""
    return tuple(
        _nic(f"roce_nic_{c.name}_total", "counter", ("rdma_device", "port"),
           f"{c.help} Provided by: {', '.join(c.nics)}; absent on a NIC without it.",
           HW_COUNTERS.format(counter=c.name))
        for c in NIC_COUNTERS
        if c.exported
    )  # fmt: skip


# Packet trimming (a RoCE class in mode lossy-trim): the SAI/OpenConfig triplet, per queue and
# per port. A figure the device did not report (N/A, a release without the column, a switch
# that does not trim) is absent, never 0.
SONIC_TRIM = "SONiC `show queue counters --trim -j`"
SONIC_TRIM_PORT = "SONiC `show interfaces counters trim -j`"
NVUE_TRIM = "Cumulus `nv show interface IF counters packet-trim` (5.15: `… packet-trim counters`)"
NVUE_TRIM_PORT = "Cumulus `nv show system forwarding packet-trim counters` (5.19)"
TRIM_MEANINGS = (
    ("trimmed", "Packets trimmed instead of dropped (sent + dropped trimmed packets; SAI "
     "`TRIM_PACKETS`, OpenConfig `trim-pkts`; Cumulus: Trim Eligible Packets)."),
    ("trim_sent", "Trimmed packets sent on through the trim queue (SAI `TX_TRIM_PACKETS`, "
     "OpenConfig `out-trim-pkts`). Absent where the release or ASIC does not report it "
     "(SONiC 202505, Cumulus per queue, Spectrum-4 N/A)."),
    ("trim_dropped", "Trimmed packets dropped at the trim queue (SAI `DROPPED_TRIM_PACKETS`, "
     "OpenConfig `dropped-trim-pkts`): the loss notice itself was lost. SONiC 202511 and "
     "later only."),
)  # fmt: skip


def _trim_specs() -> tuple[MetricSpec, ...]:
    """``roce_queue_<what>_packets_total`` and ``roce_interface_<what>_packets_total``."""
    specs = []
    for what, text in TRIM_MEANINGS:
        specs.append(
            _switch(
                f"roce_queue_{what}_packets_total",
                "counter",
                (*IFACE, "queue"),
                f"{text} Per egress queue; absent when not read.",
                f"{SONIC_TRIM}; {NVUE_TRIM}",
            )
        )
    for what, text in TRIM_MEANINGS:
        specs.append(
            _switch(
                f"roce_interface_{what}_packets_total",
                "counter",
                IFACE,
                f"{text} Whole port; absent when not read.",
                f"{SONIC_TRIM_PORT}; {NVUE_TRIM_PORT}",
            )
        )
    return tuple(specs)  # fmt: skip


SPECS: tuple[MetricSpec, ...] = (
    # ------------------------------------------------------------------ switch
    _switch("roce_pfc_frames_total", "counter", (*IFACE, "priority", "direction"),
       "PFC pause frames received (rx) or sent (tx) on the interface, per priority. EOS counts "
       "per interface only; the agent attributes those to the interface's lossless priority. "
       "Lean: only the priorities the intent makes lossless on the interface, plus any "
       "priority whose PFC, headroom or watchdog counter was ever non-zero.",
       EOS_PFC),
    _switch("roce_queue_transmitted_packets_total", "counter", (*IFACE, "queue"),
       "Packets transmitted from the egress queue.", EOS_QUEUE),
    _switch("roce_queue_transmitted_bytes_total", "counter", (*IFACE, "queue"),
       "Bytes transmitted from the egress queue.", EOS_QUEUE),
    _switch("roce_queue_dropped_packets_total", "counter", (*IFACE, "queue"),
       "Packets dropped at the egress queue (tail or WRED drops). Any increase on a lossless "
       "queue is a fabric fault.", EOS_QUEUE),
    _switch("roce_queue_ecn_marked_packets_total", "counter", (*IFACE, "queue"),
       "Packets CE-marked by WRED/ECN at the egress queue.", EOS_ECN),
    _switch("roce_queue_watermark_bytes", "gauge", (*IFACE, "queue"),
       "Peak egress queue occupancy since the device last cleared it. Present only for "
       "platforms that report it.", SONIC_WATERMARK),
    *_trim_specs(),
    _switch("roce_headroom_dropped_packets_total", "counter", (*IFACE, "priority"),
       "Packets dropped at ingress for the priority (headroom exhausted): PFC fired too late "
       "for the cable length or the headroom is too small. Lean, as roce_pfc_frames_total.",
       EOS_DROPS),
    _switch("roce_pfc_watchdog_storms_detected_total", "counter", (*IFACE, "priority"),
       "PFC storms the watchdog detected (a queue paused longer than the detection time). "
       "Lean, as roce_pfc_frames_total.", EOS_WATCHDOG),
    _switch("roce_pfc_watchdog_storms_restored_total", "counter", (*IFACE, "priority"),
       "PFC storms the watchdog restored from. Lean, as roce_pfc_frames_total.", EOS_WATCHDOG),
    _switch("roce_pfc_watchdog_stormed", "gauge", (*IFACE, "priority"),
       "1 while the watchdog holds the queue in the stormed state (detected > restored). "
       "Lean, as roce_pfc_frames_total.", EOS_WATCHDOG),
    _switch("roce_intended_class_info", "gauge",
       (*IFACE, "priority", "queue", "pfc", "ecn"),
       "Constant 1 per interface and traffic class (priority = queue in every profile): "
       "pfc=on for lossless classes, ecn=on where the intent marks ECN. Join counters "
       "with it to select the lossless class. Present from the first scrape (it is the "
       "plan, not a reading).",
       "the fabric file and its profile (the plan), not the device"),
    # ------------------------------------------------------------------ compliance
    _compliance("roce_drift_items", "gauge", ("device",),
       "Settings on the device that differ from the plan (what `roce-agent drift` lists). "
       "Absent until the device's configuration was read once (by a poll, or by the "
       "daemon's reconcile): a device never read has no drift figure, not 0.",
       "`show running-config | json` diffed against the plan (or fed by the daemon)"),
    _compliance("roce_config_sessions_pending", "gauge", ("device",),
       "Changes on the device that are not final: unconfirmed commits under a rollback "
       "timer, uncommitted sessions, checkpoints or write-ahead records left by a run (what "
       "RC009 and `roce-agent drift` report). Absent until the device was read once.",
       "EOS `show configuration sessions detail | json` (per platform: docs/push.md, Platforms)"),
    _compliance("roce_config_session_oldest_age_seconds", "gauge", ("device",),
       "Age of the oldest pending change on the device; 0 when there is none. Absent where "
       "the device does not report ages.",
       "same read as roce_config_sessions_pending"),
    _compliance("roce_check_result", "gauge", ("check", "device", "result"),
       "1 for the latest result of a check on a device, 0 for the other results "
       "(pass, fail, error, unverified, skipped). unverified: the device could not be read, "
       "so the check could not judge it (the check's message in the report says why); "
       "skipped: the check does not apply. No series until checks are fed.",
       "the checks (`SnapshotStore.update_checks`)"),
    _compliance("roce_check_last_run_timestamp_seconds", "gauge", (),
       "When check results were last fed (Unix time).", "`SnapshotStore.update_checks`"),
    # ------------------------------------------------------------------ probes
    _probes("roce_probe_packets_sent_total", "counter", FLOW,
       "RoCEv2 probe packets sent, summed over probe runs.", "probe scenario results"),
    _probes("roce_probe_packets_received_total", "counter", FLOW,
       "RoCEv2 probe packets received.", "probe scenario / receiver results"),
    _probes("roce_probe_packets_lost_total", "counter", FLOW,
       "Probe packets lost (PSN gaps never filled, and the tail never received).",
       "probe scenario / receiver results"),
    _probes("roce_probe_packets_reordered_total", "counter", FLOW,
       "Probe packets that arrived after a later one (a gap filled late).",
       "probe scenario / receiver results"),
    _probes("roce_probe_packets_ce_marked_total", "counter", FLOW,
       "Probe packets that arrived with ECN CE set.", "probe scenario / receiver results"),
    _probes("roce_probe_last_run_lost_packets", "gauge", FLOW,
       "Packets the latest probe run of the flow lost. Alert on this rather than on "
       "increase() of the counter: a flow's first run creates its series, and Prometheus "
       "sees no increase in a series' first sample.", "probe scenario / receiver results"),
    _probes("roce_probe_cnps_received_total", "counter", FLOW,
       "CNPs the sender (src) received for the flow to dst.", "probe scenario results"),
    _probes("roce_probe_invalid_frames_total", "counter", ("scenario", "host"),
       "Malformed frames on UDP 4791 (bad ICRC, truncated BTH) the receiving host counted.",
       "probe receiver results (`totals.invalid`)"),
    _probes("roce_probe_latency_seconds", "histogram", FLOW,
       "One-way latency of probe packets (sender timestamp to receiver clock).",
       "probe receiver results (`latency.buckets_le_s`)"),
    _probes("roce_probe_paused_seconds_total", "counter", ("scenario", "host", "priority"),
       "Time the host was paused by PFC on the wire, per priority (quanta x 512 bit times at "
       "link speed).", "probe sender `paused_s`, receiver and sniffer `pfc.priorities`"),
    _probes("roce_probe_runs_total", "counter", ("scenario", "result"),
       "Probe runs by verdict.", "probe scenario results (`passed`)"),
    _probes("roce_probe_last_run_timestamp_seconds", "gauge", ("scenario",),
       "When the latest result of the scenario was stored (Unix time).",
       "probe scenario results"),
    _probes("roce_probe_result_files_skipped_total", "counter", ("reason",),
       "Files of --probe-results not read, by reason: symlink, not_regular (a FIFO, device, "
       "socket or directory), too_large (over 4 MiB), timeout (over 2 s), unreadable, "
       "not_json, not_a_result. Each is logged once and read again only when it changes. "
       "Present when a results directory is read.",
       "the exporter (`--probe-results`)"),
    # ------------------------------------------------------------------ locate
    _probes("roce_locate_suspect", "gauge", ("kind", "element"),
       "Confidence (0-1) of each suspect the LATEST locate run named: a link (directed "
       "`leaf1:Ethernet3>spine1`, `h1>leaf1`, or a cable `a:p<>b:q`), a port (`leaf1:Ethernet3`), "
       "a switch or a host NIC (the host's name). A suspect the next run no longer names loses "
       "its series; a run that finds nothing leaves none. Absent until the first locate run.",
       "locate runs (`SnapshotStore.update_locate`: the `locate` playbook step in the daemon)"),
    _probes("roce_locate_last_run_timestamp_seconds", "gauge", (),
       "When the latest locate run was stored (Unix time). Absent until the first run.",
       "locate runs"),
    _probes("roce_locate_paths", "gauge", (),
       "Paths (host pair and ECMP source port) the latest locate run probed.", "locate runs"),
    _probes("roce_locate_bad_paths", "gauge", (),
       "Paths of the latest locate run that lost, corrupted or delayed probes.", "locate runs"),
    # ------------------------------------------------------------------ host NIC
    _nic("roce_nic_port_info", "gauge", ("rdma_device", "port", "dcqcn"),
       "Constant 1 per RDMA port whose hw_counters were read: dcqcn=yes when it provides "
       "np_cnp_sent and rp_cnp_handled (mlx5), no when it does not (rxe: Soft-RoCE has no "
       "DCQCN), so a missing CNP series reads as 'this NIC cannot tell'. Absent until the "
       "first successful read.",
       "`/sys/class/infiniband/DEV/ports/N/hw_counters/`"),
    *_nic_counter_specs(),
    _nic("roce_nic_pause_frames_total", "counter", ("interface", "priority", "direction"),
       "PFC pause frames received (rx) or sent (tx) by the NIC port, per priority "
       "(`rx_prioN_pause`, `tx_prioN_pause`). Only for netdevs whose ethtool lists "
       "per-priority pause counters (absent for virtio_net, veth, or mlx5 with PFC off on "
       "every priority), and only for the priorities it lists (mlx5 lists the PFC-enabled "
       "ones): a priority the driver does not report has no series, not 0.", ETHTOOL),
    _nic("roce_nic_pause_duration_seconds_total", "counter",
       ("interface", "priority", "direction"),
       "Time paused (rx: the port could not send; tx: it paused its peer), per priority. "
       "ethtool reports microseconds (`rx_prioN_pause_duration`); converted to seconds. "
       "Present for the same netdevs as roce_nic_pause_frames_total.",
       ETHTOOL),
    _nic("roce_nic_collect_errors_total", "counter", ("source",),
       "Failed reads of the host NIC counters, by source (sysfs, ethtool).",
       "the exporter"),
    # ------------------------------------------------------------------ the agent itself
    _agent("roce_device_up", "gauge", ("device",),
       "1 if the latest poll of the switch succeeded within its timeout, else 0 (also 0 "
       "before the first poll). With roce_device_state, the only series about a switch that "
       "exists before its first successful poll.", "the exporter's poller"),
    _agent("roce_device_state", "gauge", ("device", "state"),
       "1 for what the exporter knows of the switch now, 0 for the other states: up (the "
       "latest poll read it), not_polled_yet (no poll has finished: nothing read yet), or why "
       "the latest poll failed (timeout, auth, connect, parse, other; over gNMI also reset, "
       "stale, oversized, unsupported). Exists from the first scrape: where a figure about a "
       "switch is absent, this says why.",
       "the exporter's poller or gNMI subscription"),
    _agent("roce_device_telemetry_info", "gauge", ("device", "transport"),
       "Constant 1: how the exporter reads the switch's counters -- gnmi (a STREAM "
       "subscription, sampled at --interval) or ssh (a poll every --interval). Absent while "
       "--telemetry auto has not decided yet.", "the exporter"),
    _agent("roce_poll_duration_seconds", "gauge", ("device",),
       "Duration of the latest poll of the switch (the timeout when it timed out). Absent "
       "before the first successful poll.", "the exporter's poller"),
    _agent("roce_last_successful_poll_timestamp_seconds", "gauge", ("device",),
       "When the latest successful poll finished (Unix time); over gNMI, the switch's "
       "timestamp of the latest sample applied. Absent before the first success.",
       "the exporter's poller or gNMI subscription"),
    _agent("roce_polls_total", "counter", ("device",),
       "Polls attempted (failed ones before the first success included); over gNMI, samples "
       "applied plus failures. Absent before the first successful poll.",
       "the exporter's poller or gNMI subscription"),
    _agent("roce_poll_errors_total", "counter", ("device", "reason"),
       "Failed polls by reason: timeout (over --timeout or a read timeout), auth, connect, "
       "parse (the device answered something the platform could not read), other. Absent "
       "before the first successful poll (the log and roce_device_up tell a device that "
       "never answered).", "the exporter's poller"),
    _agent("roce_exporter_info", "gauge", ("version",),
       "Constant 1: the agent version and the fabric name.", "the exporter"),
    _agent("roce_exporter_shard_info", "gauge", ("shard",),
       "Constant 1: the shard this exporter serves, K/N (1/1: the whole fabric; `--shard`).",
       "the exporter"),
    _agent("roce_exporter_devices", "gauge", (),
       "Fabric devices (switches and hosts) this exporter's shard owns; summed over the "
       "shards of a fabric it is the fabric's device count.", "the fabric file and --shard"),
)  # fmt: skip

# The HTTP server's own series (exporters/server.py renders them next to the collector's; the
# exporter's registry adds `fabric`). Apart from SPECS: the collector builds families for every
# row of SPECS, and these are not its to build.
HTTP = "the exporter's HTTP server"
HTTP_SERVER_SPECS = (
    _agent("roce_exporter_http_connections", "gauge", (),
       "HTTP connections being served now (at most roce_exporter_http_max_connections).", HTTP),
    _agent("roce_exporter_http_max_connections", "gauge", (),
       "Connections served at once, from all client addresses together.", HTTP),
    _agent("roce_exporter_http_max_connections_per_address", "gauge", (),
       "Connections served at once from one client address (an IPv6 client: its /64).", HTTP),
    _agent("roce_exporter_http_busiest_address_connections", "gauge", (),
       "Connections held now by the client address that holds the most. At "
       "roce_exporter_http_max_connections_per_address for long, with bad_clients "
       "address_cap or evicted rising: one client is flooding the exporter (it cannot take "
       "the others' slots).", HTTP),
    _agent("roce_exporter_http_bad_clients_total", "counter", ("reason",),
       "Connections refused, cut or failed, by reason. Refused with 503 (a TLS one closed): "
       "connection_cap (every slot taken and none the fairness rule may cut), address_cap "
       "(its address holds its cap and none of those is still waiting), response_cap (the "
       "pages in flight to its address are at its budget). Cut: header_deadline, "
       "response_deadline, evicted (still waiting - for its TLS handshake, request head or "
       "password check - when a newer connection needed the slot), slow_reader (its answer "
       "unread for slow_reader_s when a newer connection needed the slot). Failed: "
       "bad_request, tls_handshake, disconnected.", HTTP),
)  # fmt: skip
ALL_SPECS = (*SPECS, *HTTP_SERVER_SPECS)
BY_NAME = {spec.name: spec for spec in ALL_SPECS}
GROUP_TITLES = {
    "switch": "Switch counters (polled over SSH, one session per device kept between polls)",
    "compliance": "Compliance",
    "probes": "Probes and locate (fed by probe results and `locate` runs)",
    "nic": "Host NIC (`--host-nic`, or automatic when /sys/class/infiniband exists)",
    "agent": "The exporter itself",
}


def exposed_names() -> set[str]:
    """Every sample name a scrape can contain (histograms have three per family)."""
    names = set()
    for spec in ALL_SPECS:
        if spec.type == "histogram":
            names |= {f"{spec.name}_bucket", f"{spec.name}_sum", f"{spec.name}_count"}
        else:
            names.add(spec.name)
    return names


def markdown() -> str:
    """The text of ``exporters/METRICS.md``."""
    lines = [
        "# Metrics of `roce-agent exporter`",
        "",
        "Generated from `exporters/metrics.py` (`python -m exporters.metrics > "
        "exporters/METRICS.md`); a unit test fails when this file is stale.",
        "",
        "Conventions: prefix `roce_`, base units (seconds, bytes), `_total` on counters. "
        "Label values are bounded: names from the fabric file, priorities 0-7, and the fixed "
        "sets listed below; never IP addresses or session names.",
        "",
        "**Every series carries `fabric`** (the fabric file's `name`), device, probe, host NIC "
        "and exporter series alike. Why a label and not a `roce_fabric_info` join: queries, "
        'alerts and dashboards filter on it directly (`{fabric="$fabric"}`), with no '
        "`* on(instance) group_left(fabric) roce_fabric_info` in every alert and panel (a join "
        "that also breaks while the info series is missing); and one exporter serves exactly "
        "one fabric, so the label has one value per target and adds no series at all.",
        "",
        "**Absent until read.** A figure exists only once what it is about was read: nothing "
        "reads 0 because nothing was read. Before a switch's first successful poll, "
        "`roce_device_up` (0) and `roce_device_state` (`not_polled_yet`, or why the poll "
        "failed) are its only series; every other series about it (counters, poll statistics, "
        "watermarks) appears with its first successful poll, holding the device's own running "
        "totals. Drift and pending sessions appear when its configuration was first read (by "
        "a poll, or by the daemon's reconcile: a switch the reconcile could not read gets no "
        "drift figure, and the checks about it say `unverified`). `roce_intended_class_info` "
        "is the plan and exists from the start. Only interfaces the device reports get "
        "series. A switch that stops answering keeps its last values, with `roce_device_up` "
        "0, `roce_device_state` saying why and `roce_last_successful_poll_timestamp_seconds` "
        "telling their age. Probe series exist for what a probe result carries: a receiver's "
        "result (no sender side) gives no sent or CNP series, a flow without latency samples "
        "no latency histogram, and paused time exists only for the priorities a result "
        "measured. Host NIC series exist only for the counters a NIC provides and the "
        "priorities its driver lists. `roce_exporter_shard_info` and `roce_exporter_devices` "
        "exist from the first scrape.",
        "",
        "**Which transport fills a switch's series, and how fresh.** "
        "`roce_device_telemetry_info{transport}` says how the switch's counters are read. "
        "`ssh`: every series comes from the platform's `show` commands (the source column), "
        "read every `--interval`. `gnmi`: PFC, queue, ECN and watermark series (and the "
        "watchdog on SONiC and EOS) come from the switch's gNMI stream, each sample applied "
        "once it is complete, so they are as fresh as `--interval` (1 s and up). What the "
        "NOS does not stream (headroom drops on SONiC, EOS and Cumulus Linux, the PFC "
        "watchdog on Cumulus Linux) is read over SSH all the same, with the configuration, "
        "every `--interval` but no more often than every 15 s; with `--no-ssh-complement`, "
        "or while that read has not succeeded, those series are absent (not read), never 0. "
        'The paths per NOS are in docs/exporter.md, "Telemetry".',
        "",
        "**Lean per-priority series.** Queue series exist for every queue the device reports "
        "on a reported interface (EOS, SONiC and NVUE report all 8). The per-priority PFC, "
        "headroom and watchdog series "
        "(`roce_pfc_frames_total`, `roce_headroom_dropped_packets_total`, "
        "`roce_pfc_watchdog_*`) exist only for the priorities the intent makes lossless on "
        "that interface, plus every priority where one of those counters was ever non-zero; "
        "such a priority keeps its series from then on. Why this is safe: on a lossy priority "
        "these counters are 0 by construction (no PFC is sent or honoured there, no headroom "
        "is reserved, the watchdog watches paused queues only), so a series left out would "
        "only ever have read 0; the moment one of them is not 0 (a misconfigured peer sending "
        "PFC on priority 5, say) its priority appears, with its real value, and stays, so "
        "nothing real is hidden and rate()/increase() never see it vanish. Everything a "
        "lossless class needs (its PFC, headroom and watchdog series, and every queue series) "
        "is there whenever the device reports it. This cuts 42 of the 88 series of a "
        "1-lossless-class port.",
        "",
        f"- `direction`: {', '.join(DIRECTIONS)}",
        f"- `reason` (poll errors): {', '.join(POLL_ERROR_REASONS)}",
        f"- `state` (devices): {', '.join(DEVICE_STATES)}",
        f"- `result` (checks): {', '.join(CHECK_RESULTS)}; (probe runs): "
        f"{', '.join(PROBE_RESULTS)}",
        f"- `scenario`: {', '.join(PROBE_SCENARIOS)}; `src`, `dst`, `host`: host names of the "
        "fabric file (`unknown` for an address the fabric does not name)",
        "- `pfc`, `ecn`: on, off",
        f"- `dcqcn` (host NIC ports): {', '.join(YES_NO)}; `rdma_device`, `port`: the kernel's "
        "RDMA device names and port numbers (/sys/class/infiniband)",
        f"- `reason` (HTTP clients): {', '.join(HTTP_BAD_CLIENT_REASONS)}",
        f"- `kind` (locate suspects): {', '.join(LOCATE_KINDS)}; `element`: a name the fabric "
        "file defines for that kind (switch or host name, `device:port`, directed link "
        "`a:port>b` or `h>leaf`, cable `a:p<>b:q`), anything else is refused",
        "",
    ]
    for group, title in GROUP_TITLES.items():
        lines += [f"## {title}", "", "| metric | type | labels | meaning | source |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for spec in ALL_SPECS:
            if spec.group != group:
                continue
            labels = ", ".join(f"`{label}`" for label in spec.labels) or "-"
            # GitHub tables need pipes escaped, even inside code spans (`... | json`).
            meaning, source = (text.replace("|", "\\|") for text in (spec.help, spec.source))
            lines.append(f"| `{spec.name}` | {spec.type} | {labels} | {meaning} | {source} |")
        lines.append("")
        if group == "nic":
            lines += _nic_counter_table()
    return "\n".join(lines)


def _nic_counter_table() -> list[str]:
    """Which hw_counters each NIC kind has, and the rule for the ones it lacks."""
    lines = [
        "### Which counters a NIC provides",
        "",
        "**Absent = the NIC does not provide it.** A `roce_nic_<counter>_total` series exists "
        "only for a counter whose file the port's driver creates in "
        "`/sys/class/infiniband/DEV/ports/N/hw_counters/` and that reads an integer; a missing "
        'file, a failed read (the driver\'s error, e.g. EINVAL) or "N/A" leaves the series '
        "out, never 0. Soft-RoCE (rxe) has no DCQCN, so an rxe port has no np_/rp_ series: "
        '"0 CNPs sent" would be a claim it cannot make, and `roce_nic_port_info` says '
        '`dcqcn="no"`. mlx5 creates each counter group only when the firmware has its '
        "capability, so an mlx5 port may lack some too. The same holds for pause: "
        "`roce_nic_pause_*` exist only for netdevs whose `ethtool -S` lists per-priority "
        "pause counters; virtio_net (under rxe in the lab's VMs) lists only per-queue "
        "counters (`rx_queue_0_packets`, ..., drivers/net/virtio_net.c), so it has none.",
        "",
        "Loss signs side by side: mlx5 `out_of_sequence` ~ rxe `out_of_seq_request` (the "
        "responder saw a PSN gap), mlx5 `packet_seq_err` ~ rxe `rcvd_seq_err` (the requester "
        "got a sequence NAK); rxe adds `retry_exceeded_err`, loss the retransmissions could "
        "not repair.",
        "",
        "| counter | mlx5 | rxe | meaning | kernel source |",
        "|---|---|---|---|---|",
    ]
    for counter in NIC_COUNTERS:
        has = ["yes" if kind in counter.nics else "-" for kind in NIC_KINDS]
        name = f"`{counter.name}`" if counter.exported else f"`{counter.name}` (not read)"
        lines.append(f"| {name} | {' | '.join(has)} | {counter.help} | {counter.kernel} |")
    lines += [
        "",
        "rxe's counter names: drivers/infiniband/sw/rxe/rxe_hw_counters.c (Linux 6.1: the 15 "
        "above, plus `lifespan` from the core); mlx5's: drivers/infiniband/hw/mlx5/counters.c "
        "(its other counters, such as `out_of_buffer` or `local_ack_timeout_err`, are not "
        "read).",
        "",
    ]
    return lines


if __name__ == "__main__":
    sys.stdout.write(markdown())
