"""The intent model: profiles round-trip, overrides merge, credentials stay secret."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.errors import CredentialError, IntentError
from agent.intent.loader import load_fabric, load_profile_model
from agent.intent.model import Credentials, Device, Port, Profile

ROOT = Path(__file__).resolve().parents[2]
PROFILES = sorted((ROOT / "playbooks" / "profiles").glob("*.yml"))
FABRICS = sorted((ROOT / "playbooks" / "fabrics").glob("*.yml"))


def test_named_profiles_exist() -> None:
    names = {p.stem for p in PROFILES}
    assert {"nvidia-default", "dcqcn-paper", "sonic-default", "pfc-only"} <= names


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.stem)
def test_profile_round_trips(path: Path) -> None:
    profile = load_profile_model(path)
    assert profile.name == path.stem
    again = Profile.model_validate(profile.model_dump())
    assert again == profile
    assert Profile.model_validate_json(profile.model_dump_json()) == profile


@pytest.mark.parametrize(
    ("stem", "queue", "low", "high", "probability"),
    [
        ("nvidia-default", 3, 150_000, 1_500_000, 100),
        ("dcqcn-paper", 3, 5_000, 200_000, 1),
        ("sonic-default", 3, 1_048_576, 2_097_152, 5),
    ],
)
def test_profile_ecn_values(stem: str, queue: int, low: int, high: int, probability: int) -> None:
    ecn = load_profile_model(ROOT / "playbooks" / "profiles" / f"{stem}.yml").ecn
    assert ecn.enabled
    assert ecn.queues[queue].min_threshold == low
    assert ecn.queues[queue].max_threshold == high
    assert ecn.queues[queue].max_probability == probability


def test_pfc_only_profile_has_pfc_without_ecn() -> None:
    profile = load_profile_model(ROOT / "playbooks" / "profiles" / "pfc-only.yml")
    assert not profile.ecn.enabled
    assert profile.pfc.priorities == [3]


def test_sonic_profile_fixes_the_dscp26_trap() -> None:
    profile = load_profile_model(ROOT / "playbooks" / "profiles" / "sonic-default.yml")
    assert (profile.roce.dscp, profile.roce.priority) == (26, 3)
    assert profile.roce.priority in profile.pfc.priorities


@pytest.mark.parametrize("path", FABRICS, ids=lambda p: p.stem)
def test_example_fabrics_are_valid(path: Path) -> None:
    loaded = load_fabric(path)
    assert loaded.intent.devices


def test_pod_400g_shape() -> None:
    intent = load_fabric(ROOT / "playbooks" / "fabrics" / "pod-400g.yml").intent
    roles = [d.role for d in intent.devices]
    assert (roles.count("spine"), roles.count("leaf"), roles.count("host")) == (4, 8, 64)
    assert {p.speed for d in intent.devices for p in d.ports} == {400_000_000_000}


def _fabric(tmp_path: Path, overrides: str = "{}", extra_device: str = "") -> Path:
    path = tmp_path / "fabric.yml"
    path.write_text(
        f"""name: t
profile: nvidia-default
overrides: {overrides}
defaults:
  username: admin
  credentials: {{password_file: secret.txt}}
devices:
  - name: leaf1
    platform: arista_eos
    role: leaf
    host: leaf1.example
    ports: [{{name: Ethernet1, speed: 100G, cable_m: 3, mtu: 9100, peer: "h1:eth0"}}]
  - name: h1
    platform: linux_host
    role: host
    netns: lab-h1
    ports: [{{name: eth0, speed: 100G, cable_m: 3, mtu: 9100, peer: "leaf1:Ethernet1"}}]
{extra_device}"""
    )
    return path


def test_overrides_merge_deeply(tmp_path: Path) -> None:
    path = _fabric(tmp_path, "{ecn: {queues: {3: {min_threshold: 100KB, max_threshold: 1MB}}}}")
    profile = load_fabric(path).intent.profile
    assert profile.ecn.queues[3].min_threshold == 100_000
    assert profile.ecn.queues[3].max_probability == 100  # kept from nvidia-default
    assert profile.pfc.watchdog.detection_ms == 300  # untouched sections stay


def test_defaults_fill_devices_and_paths_are_relative_to_the_fabric(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret\n")
    (tmp_path / "secret.txt").chmod(0o600)
    leaf = load_fabric(_fabric(tmp_path)).intent.devices[0]
    assert leaf.username == "admin"
    assert leaf.credentials is not None
    assert leaf.credentials.password_file == tmp_path / "secret.txt"
    secret = leaf.credentials.resolve_password("leaf1")
    assert secret is not None and secret.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(leaf) and "s3cret" not in str(secret)


def test_password_from_env_and_missing_env(monkeypatch: pytest.MonkeyPatch) -> None:
    credentials = Credentials(password_env="ROCE_TEST_PW")
    monkeypatch.delenv("ROCE_TEST_PW", raising=False)
    with pytest.raises(CredentialError, match=r"device leaf1: credentials\.password_env"):
        credentials.resolve_password("leaf1")
    monkeypatch.setenv("ROCE_TEST_PW", "hunter2")
    secret = credentials.resolve_password("leaf1")
    assert secret is not None and secret.get_secret_value() == "hunter2"


def _private(data: bytes) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        path.write_bytes(data)
        path.chmod(0o600)

    return make


def test_unreadable_password_file(tmp_path: Path) -> None:
    credentials = Credentials(password_file=tmp_path / "missing")
    with pytest.raises(CredentialError, match=r"credentials\.password_file: cannot read"):
        credentials.resolve_password("spine1")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: os.mkfifo(p, 0o600), "Actual: a FIFO"),
        (lambda p: p.mkdir(0o700), "Actual: a directory"),
        (lambda p: os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600)), "an empty file"),
        (_private(b"x" * 70_000), "of at most 4096 bytes"),
        (_private(b"\xff\xfe"), "not UTF-8"),
    ],
)
def test_password_file_must_be_a_small_regular_file(
    tmp_path: Path, make: Callable[[Path], object], words: str
) -> None:
    """A FIFO (or /dev/zero) as password_file must be refused at once, not read forever."""
    path = tmp_path / "pw"
    make(path)
    credentials = Credentials(password_file=path)
    with pytest.raises(CredentialError, match=r"device spine1: credentials\.password_file: ") as e:
        credentials.resolve_password("spine1")
    assert words in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize(
    "name",
    [
        "Ethernet1\nshutdown",
        "Ethernet1 ; reload",
        "Eth\x1b[0m1",
        "",
        "x" * 49,
        "1Ethernet",
        "Et:1",
        # names reach sysfs paths and file names on hosts
        "eth..0",
        "eth0/../../etc",
        "Ethernet1//1",
        "eth0/.hidden",
        "Ｅthernet1",
    ],
)
def test_interface_names_refuse_injection(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid interface name"):
        Port(name=name, speed="100G", cable_m=3, mtu=9100)


@pytest.mark.parametrize(
    "name", ["Ethernet1", "Ethernet1/1", "Ethernet1/1/4", "swp1s0", "eth0", "eth0.100", "bond0.1"]
)
def test_interface_names_accept_real_ones(name: str) -> None:
    assert Port(name=name, speed="100G", cable_m=3, mtu=9100).name == name


def test_device_needs_a_way_in() -> None:
    with pytest.raises(ValidationError, match="set host"):
        Device(name="x", platform="arista_eos", role="leaf")


def test_several_problems_reported_at_once(tmp_path: Path) -> None:
    path = _fabric(tmp_path, "{ecn: {queues: {3: {max_probability: 0}}}, pfc: {priorities: [4]}}")
    with pytest.raises(IntentError) as caught:
        load_fabric(path)
    text = str(caught.value)
    assert "IR007" in text  # field errors come first; rules need a valid model to run on


def test_validation_policy_defaults(tmp_path: Path) -> None:
    intent = load_fabric(_fabric(tmp_path)).intent
    assert intent.validation.max_lossless_drops == 0
    assert intent.validation.probe.rate == 1_000_000
