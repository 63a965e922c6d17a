"""Every float option of every command refuses nan, inf and meaningless negatives. The
options are found by walking the click tree (lazy groups included), so an option added later
cannot escape: a float option that is not a FiniteFloat fails the first test."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent.app.cli import main
from agent.app.daemon_config import DaemonConfig
from common.clicktypes import FiniteFloat

REPO = Path(__file__).resolve().parents[2]
BAD = ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1", "x"]


def float_options() -> Iterator[tuple[str, click.Parameter]]:
    def walk(
        command: click.Command, path: list[str], ctx: click.Context
    ) -> Iterator[tuple[str, click.Parameter]]:
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, name
                yield from walk(sub, [*path, name], click.Context(sub, parent=ctx, info_name=name))
            return
        for param in command.params:
            kind = param.type
            # FloatRange is a FloatParamType; a float default without type= is one too.
            if isinstance(kind, click.types.FloatParamType | FiniteFloat):
                yield f"{' '.join(path)} {param.opts[0]}", param

    yield from walk(main, ["roce-agent"], click.Context(main, info_name="roce-agent"))


OPTIONS = list(float_options())


def test_the_walk_finds_the_known_float_options() -> None:
    names = {name for name, _ in OPTIONS}
    assert {
        "roce-agent probe storm --rate",
        "roce-agent probe nccl --min-busbw-fraction",
    } <= names


@pytest.mark.parametrize(("name", "param"), OPTIONS, ids=[n for n, _ in OPTIONS])
def test_every_float_option_is_finite_and_bounded(name: str, param: click.Parameter) -> None:
    assert isinstance(param.type, FiniteFloat), f"{name}: use agent.app.support.FiniteFloat"
    assert param.type.min is not None, f"{name}: say which values are meaningless (min=)"
    ctx = click.Context(main)
    for value in BAD:
        with pytest.raises(click.BadParameter):
            param.type.convert(value, param, ctx)
    if param.default not in (None,) and isinstance(param.default, int | float):
        assert param.type.convert(param.default, param, ctx) == param.default


@pytest.mark.parametrize(
    "args",
    [
        ["exporter", "F", "--interval", "nan"],
        ["exporter", "F", "--timeout", "inf"],
        ["exporter", "F", "--interval", "-5s"],
        ["exporter", "F", "--device-interval", "leaf1=nan"],
        ["exporter", "F", "--device-interval", "leaf1=-inf"],
        ["exporter", "F", "--device-interval", "leaf1=0s"],
        ["exporter", "F", "--device-interval", "leaf1=5"],
        ["apply", "F", "--hold", "nan"],
    ],
)
def test_the_cli_exits_2_naming_the_option(args: list[str]) -> None:
    fabric = str(REPO / "playbooks" / "fabrics" / "lab-leafspine.yml")
    argv = [fabric if a == "F" else a for a in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    option = next(a for a in args if a.startswith("--") and a != "--fabric")
    assert option in result.output
    assert "Traceback" not in result.output


def test_the_real_command_refuses_nan() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agent", "exporter", "x.yml", "--interval", "nan"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 2
    assert "--interval" in done.stderr and "a duration with its unit" in done.stderr


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"fabric": "f.yml", "exporter": {"poll_interval_s": float("nan")}}, "poll_interval_s"),
        ({"fabric": "f.yml", "exporter": {"poll_interval_s": float("inf")}}, "poll_interval_s"),
        ({"fabric": "f.yml", "intervals": {"reconcile_s": float("nan")}}, "reconcile_s"),
        ({"fabric": "f.yml", "intervals": {"reconcile_s": -1}}, "reconcile_s"),
        ({"fabric": "f.yml", "playbooks": [{"name": "v", "every_s": float("inf")}]}, "every_s"),
    ],
)
def test_agent_yaml_numbers_must_be_finite(data: dict[str, object], field: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        DaemonConfig.model_validate(data)
    assert field in str(caught.value)


def test_agent_yaml_nan_is_refused_with_its_line(tmp_path: Path) -> None:
    from agent.app.daemon_config import load_config
    from agent.errors import IntentError

    config = tmp_path / "agent.yaml"
    config.write_text("fabric: f.yml\nexporter:\n  poll_interval_s: .nan\n")
    with pytest.raises(IntentError) as caught:
        load_config(config)
    assert str(caught.value).startswith(f"{config}:3:20: exporter.poll_interval_s: ")
