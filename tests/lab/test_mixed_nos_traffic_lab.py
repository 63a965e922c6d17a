"""Traffic on the mixed-NOS fabric (EOS spine1, NX-OS spine2, SONiC leaf1, NVUE leaf2; issue
#32, item 2; NX-OS: issue #46): ``validate`` with its wire probes and ``locate`` on a link of
each non-EOS leaf, after the agent applied the fabric through each switch's own NOS.

Not ``lab_parallel``: the verdicts measure the data plane (drops, pauses, FCS errors), which
needs the CPU the lab's hosts and switches run on. The control plane of the same fabric is
``test_mixed_nos_lab.py``. Traffic stays inside the lab's namespaces (198.18.0.0/15).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.faults import LabFaults
from tests.lab.support.labs import REPO, Lab, LabFactory, apply_fabric, requires_lab, run_agent

pytestmark = [pytest.mark.lab, requires_lab]
MIXED = REPO / "containerlab" / "roce-leafspine-mixed.clab.yml"
CHECKED = ("RC002", "RC003", "RC004", "RC005", "RC006", "RC008", "RC009", "RC101")


@pytest.fixture(scope="module")
def lab(module_labs: LabFactory) -> Lab:
    started = module_labs.start("mxt", MIXED, password="admin")
    apply_fabric(started)
    return started


def fabric(lab: Lab) -> str:
    return str(lab.status["fabric_file"])


def test_validate_with_traffic_passes_on_the_mixed_fabric(lab: Lab, tmp_path: Path) -> None:
    done = run_agent(
        "validate", fabric(lab), "--output", "json", "--state-dir", str(tmp_path), timeout=400
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    report = json.loads(done.stdout)
    failed = [c for c in report["checks"] if c["status"] not in ("success", "skipped")]
    assert not failed, failed
    # The checks read the SONiC and NVUE leaves and the NX-OS spine through their own drivers:
    # drift (RC008), pending changes (RC009) and the rest ran on them, not skipped.
    results = {(r["check"], r["device"]): r["status"] for r in report["checks"]}
    for switch in ("leaf1", "leaf2", "spine2"):
        assert {c: results.get((c, switch)) for c in CHECKED} == dict.fromkeys(CHECKED, "success")
    lossless = [s for s in report["steps"] if "no loss" in s["name"]]
    assert lossless and all(s["detail"]["totals"]["lost"] == 0 for s in lossless)


@pytest.mark.parametrize("link", ["leaf1:Ethernet4>spine2", "leaf2:swp1>spine1"])
def test_locate_names_a_faulty_link_of_a_sonic_and_an_nvue_leaf(lab: Lab, link: str) -> None:
    faults = LabFaults(lab.state_dir)
    added = faults.add("corrupt", link, percent=5.0)  # the fabric's own port names
    try:
        done = run_agent("locate", fabric(lab), "--duration", "2s", "--output", "json")
    finally:
        faults.remove(added.id)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    verdict = json.loads(done.stdout)
    first = verdict["suspects"][0]
    assert (first["kind"], first["element"]) == ("link", link), verdict["suspects"][:3]
