#!/usr/bin/env bash
# `make demo`: the product on the built-in virtual lab. Builds the leaf-spine lab, checks and
# plans its fabric file, probes it (pairwise, then a 2:1 incast with the switches' factory QoS:
# no PFC, no ECN — the drops the agent exists to prevent), pushes the lossless profile over SSH
# (diff, apply in config sessions with commit timer, drift), proves it on the wire (incast
# without loss, ECN and CNPs, a PFC storm drill), sweeps the ECN thresholds in the lab next to
# the fabric twin's prediction of the same sweep, and tears the lab down.
set -euo pipefail
cd "$(dirname "$0")/.."
AGENT=${AGENT:-.venv/bin/roce-agent}
LAB=roce-demo
STATE=/run/roce-agent/lab/$LAB
export ROCE_LAB_PASSWORD=${ROCE_LAB_PASSWORD:-admin}   # the lab's default credentials

if [ "$(id -u)" -ne 0 ]; then
    echo "make demo builds network namespaces: run it as root" >&2
    exit 2
fi
if [ -e "$STATE/state.json" ]; then
    echo "lab $LAB is already up (left over?): $AGENT lab down --lab $LAB" >&2
    exit 2
fi
trap '$AGENT lab down --lab $LAB' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "lab up: 2 spines, 2 leaves, 4 hosts in network namespaces (10 Mb/s ports)"
$AGENT lab up containerlab/roce-leafspine.clab.yml --name $LAB
FABRIC=$STATE/fabric.yml

step "check and plan the lab's fabric file (profile nvidia-default, lab-scale ECN)"
$AGENT check "$FABRIC"
$AGENT plan "$FABRIC" --device leaf2 --device h3

step "pairwise: every host pair at 1 Mb/s through leaf-spine-leaf"
$AGENT probe pairwise --fabric "$FABRIC" --rate 1M --duration 2

step "incast h1,h2 -> h3 at line rate with the switches' factory QoS (PFC off, ECN off)"
if $AGENT probe incast --fabric "$FABRIC" --to h3 --from h1,h2 --duration 2; then
    echo "unexpected: no loss without PFC" >&2
    exit 1
fi
echo "(expected: without PFC the RoCE class drops; the switch counters say where)"
$AGENT lab counters leaf1 --lab $LAB

STATE_DIR=$(mktemp -d)
step "drift: every switch differs from the intent"
$AGENT drift "$FABRIC" --output json | python3 -c 'import json,sys; print({d["device"]: d["changes"] for d in json.load(sys.stdin)["devices"]})' || true

step "playbook lossless-rollout: preflight, canary, wire check, batches, final validation"
echo "(each change is a config session with commit timer; any failure rolls every switch back)"
$AGENT run lossless-rollout "$FABRIC" --state-dir "$STATE_DIR"

step "a second apply changes nothing and opens no session"
$AGENT apply "$FABRIC" --yes --state-dir "$STATE_DIR"

step "playbook validate: state, counters, pairwise and incast on the wire, every check"
$AGENT validate "$FABRIC" --state-dir "$STATE_DIR" --output markdown --report-file "$STATE_DIR/report.xml"
echo "(the same report as JUnit for CI: $(grep -c '<testcase' "$STATE_DIR/report.xml") test cases in report.xml)"

step "playbook ecn-sweep: each ECN threshold set under a 2:1 incast (median of 3 runs), next to the twin's prediction"
echo "(the lab's links stand for 1 Gb/s; the twin simulates that fabric with the same thresholds)"
$AGENT run ecn-sweep "$FABRIC" --state-dir "$STATE_DIR"

step "playbook storm-drill: a bounded PFC storm; the watchdog must detect and restore it"
$AGENT run storm-drill "$FABRIC" --state-dir "$STATE_DIR"

step "audit log: every change attempt (write-ahead intent, then result), none left incomplete"
$AGENT audit --state-dir "$STATE_DIR"
$AGENT audit --incomplete --state-dir "$STATE_DIR"
rm -rf "$STATE_DIR"
