"""Fixtures of the lab tests: real labs, really torn down (the helpers they use are in
:mod:`tests.lab.support`).

A module that needs a lab of its own asks ``module_labs`` for it, once::

    @pytest.fixture(scope="module")
    def lab(module_labs: LabFactory) -> Lab:
        return module_labs.start("dm")  # lab dm<pid>, namespaces clab-dm<pid>-<node>

and every lab it started is torn down when the module ends, whatever its tests or the start
did. ``lab_factory`` does the same for one test, ``leafspine_lab`` is one lab shared by the
read-only tests of the session, ``rdma_lab`` one lab with real RDMA hosts (qemu VMs with
Soft-RoCE, the fabric applied) shared by the tests of the session that need one: booting its
VMs without KVM takes minutes, so the session boots them once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.signals import unwind_on_termination
from tests.lab.support.labs import LAB_UNAVAILABLE, Lab, LabFactory, apply_fabric, labs_in
from tests.lab.support.rdma import RDMA_LAB, VM_CONNECT_TIMEOUT


def pytest_configure(config: pytest.Config) -> None:
    """A run stopped by SIGTERM or SIGHUP tears its labs down as after ^C (common.signals)."""
    unwind_on_termination()


# First: xdist reads the groups in its own hook, which runs before this one otherwise
# (pytest-dev/pytest-xdist#1253), and then the lab modules would start their labs on both workers.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` runs the lab_parallel tests on two workers with ``--dist loadgroup``: a
    module's tests stay on one worker (its module-scoped labs start once), and the modules that
    name one ``XDIST_GROUP`` stay together (those on the session's RDMA lab: its VMs boot once)."""
    here = Path(__file__).parent
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and here in item.path.parents:
            group = getattr(module, "XDIST_GROUP", module.__name__)
            item.add_marker(pytest.mark.xdist_group(group))


def _skip_without_a_lab() -> None:
    if LAB_UNAVAILABLE:
        pytest.skip(LAB_UNAVAILABLE)


@pytest.fixture(scope="module")
def module_labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabFactory]:
    """Labs started by a module's fixtures, torn down when the module ends."""
    _skip_without_a_lab()
    with labs_in(tmp_path_factory.mktemp("labs")) as factory:
        yield factory


@pytest.fixture
def lab_factory(tmp_path: Path) -> Iterator[LabFactory]:
    """Labs started inside a test (``lab_factory.start("cy")``), torn down after it."""
    _skip_without_a_lab()
    with labs_in(tmp_path) as factory:
        yield factory


@pytest.fixture(scope="session")
def leafspine_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One lab from containerlab/roce-leafspine.clab.yml shared by the read-only tests."""
    _skip_without_a_lab()
    with labs_in(tmp_path_factory.mktemp("lab")) as factory:
        yield factory.start("ls")


@pytest.fixture(scope="session")
def rdma_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """containerlab/roce-rdma.clab.yml (h1, h2, h3 qemu VMs with rxe; h4 a namespace), the
    lossless fabric applied. Tests that use it leave the hosts and the fabric as they found
    them. Every VM is stopped by its PID at the end (qemu runs in the root namespace)."""
    _skip_without_a_lab()
    with labs_in(tmp_path_factory.mktemp("rdma")) as factory:
        started = factory.start("rdma", RDMA_LAB)
        recorded = json.loads((started.state_dir / "state.json").read_text())["processes"]
        vms = {key: int(p["pid"]) for key, p in recorded.items() if key.endswith(":vm")}
        apply_fabric(started, timeout=300, connect_timeout=VM_CONNECT_TIMEOUT)
        yield started
        factory.stop(started)
    assert sorted(vms) == ["h1:vm", "h2:vm", "h3:vm"]
    assert not [k for k, pid in vms.items() if Path(f"/proc/{pid}/cmdline").exists()
                and b"qemu" in Path(f"/proc/{pid}/cmdline").read_bytes()]  # fmt: skip
