"""A real Prometheus server for the lab tests (Debian's ``prometheus``; ``make test`` installs
it with its service start suppressed): one per test, on a free loopback port, its own TSDB in
the test's folder, stopped by PID."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.lab.support.loopback import free_port


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_prometheus(config: dict[str, Any], folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Write ``config``, check it with promtool, start Prometheus and wait until it is ready;
    (the process, its base URL). A port taken between free_port() and the bind: another."""
    config_file = folder / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    checked = subprocess.run(
        ["promtool", "check", "config", str(config_file)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for _attempt in range(3):
        port = free_port()
        with (folder / "prometheus.log").open("wb") as log:
            process = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={config_file}",
                    f"--storage.tsdb.path={folder / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--storage.tsdb.retention.time=1h",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as response:
                    if response.status == 200:
                        return process, url
            except OSError:
                time.sleep(0.2)
        stop(process)
    raise AssertionError((folder / "prometheus.log").read_text()[-2000:])


def query(url: str, expr: str) -> list[dict[str, Any]]:
    """The series of an instant query of the Prometheus at ``url``."""
    full = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(full, timeout=10) as response:
        data = json.loads(response.read())
    assert data["status"] == "success", data
    result: list[dict[str, Any]] = data["data"]["result"]
    return result
