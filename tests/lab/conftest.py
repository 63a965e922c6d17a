"""Fixtures of the lab tests: real labs, really torn down (the helpers they use are in
:mod:`tests.lab.support`).

A module that needs a lab of its own asks ``module_labs`` for it, once::

    @pytest.fixture(scope="module")
    def lab(module_labs: LabFactory) -> Lab:
        return module_labs.start("dm")  # lab dm<pid>, namespaces clab-dm<pid>-<node>

and every lab it started is torn down when the module ends, whatever its tests or the start
did. ``lab_factory`` does the same for one test, ``leafspine_lab`` is one lab shared by the
read-only tests of the session.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.support.labs import LAB_UNAVAILABLE, Lab, LabFactory, labs_in


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
