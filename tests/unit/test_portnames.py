"""Port names per platform (agent.intent.portnames, rule IR021): the names each NOS gives its
data ports are accepted, every other platform's names are refused with the expected form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.intent.model import PLATFORMS
from agent.intent.portnames import PORT_NAME_EXAMPLES, PORT_NAME_PATTERNS, check_port_name

# (platform, name, accepted)
CASES = [
    ("arista_eos", "Ethernet1", True),
    ("arista_eos", "Ethernet1/1", True),
    ("arista_eos", "Ethernet3/1/1", True),
    ("arista_eos", "Ethernet54/4", True),
    ("arista_eos", "swp99", False),
    ("arista_eos", "Ethernet1/1/1/1", False),
    ("arista_eos", "Et1", False),  # EOS accepts the abbreviation at the CLI; the fabric file
    ("arista_eos", "ethernet1", False),  # holds the full name show commands print
    ("arista_eos", "Ethernet01", False),
    ("arista_eos", "Management1", False),
    ("cisco_nxos", "Ethernet1/1", True),
    ("cisco_nxos", "Ethernet1/49/2", True),
    ("cisco_nxos", "Ethernet1", False),
    ("cisco_nxos", "swp1", False),
    ("sonic", "Ethernet0", True),
    ("sonic", "Ethernet120", True),
    ("sonic", "Ethernet1/1", False),
    ("sonic", "etp1", False),
    ("sonic", "Eth1/1", False),
    ("cumulus_nvue", "swp1", True),
    ("cumulus_nvue", "swp1s0", True),
    ("cumulus_nvue", "swp64s3", True),
    ("cumulus_nvue", "Ethernet1", False),
    ("cumulus_nvue", "swp", False),
    ("cumulus_nvue", "eth0", False),
    ("linux_host", "eth0", True),
    ("linux_host", "ens1f0np0", True),
    ("linux_host", "Ethernet1/1", True),
]


@pytest.mark.parametrize(("platform", "name", "accepted"), CASES)
def test_port_names_per_platform(platform: str, name: str, accepted: bool) -> None:
    expected = check_port_name(platform, name)
    if accepted:
        assert expected is None
    else:
        assert expected is not None
        assert platform in expected and PORT_NAME_EXAMPLES[platform] in expected


def test_every_platform_has_a_pattern_and_examples_that_pass() -> None:
    assert set(PORT_NAME_PATTERNS) == set(PLATFORMS) == set(PORT_NAME_EXAMPLES)
    for platform, examples in PORT_NAME_EXAMPLES.items():
        for example in examples.replace(" or ", ", ").split(", "):
            assert check_port_name(platform, example) is None, (platform, example)


def test_unknown_platform_names_the_known_ones() -> None:
    assert check_port_name("junos", "et-0/0/0") == f"a platform among {', '.join(PLATFORMS)}"


def test_the_message_reads_after_expected() -> None:
    assert check_port_name("arista_eos", "swp99") == (
        "an arista_eos interface name such as Ethernet1, Ethernet1/1 or Ethernet3/1/1"
    )
    assert check_port_name("sonic", "Ethernet1/1") == (
        "a sonic interface name such as Ethernet0 or Ethernet8"
    )


numbers = st.integers(min_value=0, max_value=9999).map(str)


@given(parts=st.lists(numbers, min_size=1, max_size=3))
def test_eos_accepts_one_to_three_numbers(parts: list[str]) -> None:
    name = "Ethernet" + "/".join(parts)
    assert check_port_name("arista_eos", name) is None
    # SONiC has no slashes; NX-OS needs at least slot/port
    assert (check_port_name("sonic", name) is None) == (len(parts) == 1)
    assert (check_port_name("cisco_nxos", name) is None) == (len(parts) >= 2)


@given(port=numbers, breakout=st.none() | numbers)
def test_cumulus_names_are_never_eos_names(port: str, breakout: str | None) -> None:
    name = f"swp{port}" + (f"s{breakout}" if breakout is not None else "")
    assert check_port_name("cumulus_nvue", name) is None
    for platform in ("arista_eos", "cisco_nxos", "sonic"):
        assert check_port_name(platform, name) is not None


@given(name=st.text(min_size=1, max_size=20))
def test_no_switch_pattern_accepts_control_characters_or_spaces(name: str) -> None:
    if any(not c.isascii() or (not c.isalnum() and c != "/") for c in name):
        for platform in ("arista_eos", "cisco_nxos", "sonic", "cumulus_nvue"):
            assert check_port_name(platform, name) is not None
