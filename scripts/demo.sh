#!/usr/bin/env bash
# `make demo`: the product on the built-in virtual lab. Builds the leaf-spine lab, checks and
# plans its fabric file, probes it (pairwise, then a 2:1 incast with the switches' factory QoS:
# no PFC, no ECN — the drops the agent exists to prevent), pushes the lossless profile over SSH
# (diff, apply in config sessions with commit timer, drift), proves it on the wire (incast
# without loss, ECN and CNPs, a PFC storm drill) and tears the lab down.
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

step "apply: canary first, then a batch; each change in a config session with commit timer"
$AGENT apply "$FABRIC" --yes --state-dir "$STATE_DIR"

step "drift after apply (exit 0) and a second apply (0 changes, no session)"
$AGENT drift "$FABRIC"
$AGENT apply "$FABRIC" --yes --state-dir "$STATE_DIR"

step "incast again: no loss, ECN marks, CNPs, senders slowed by DCQCN, pauses on the wire"
$AGENT probe incast --fabric "$FABRIC" --to h3 --from h1,h2 --duration 2

step "PFC storm drill from h3 (with traffic from h1 queued behind it)"
$AGENT probe storm --fabric "$FABRIC" --host h3 --traffic-from h1 --duration 1.5
$AGENT lab counters leaf2 --lab $LAB

step "audit log"
cut -c1-160 "$STATE_DIR/audit.jsonl"
rm -rf "$STATE_DIR"
