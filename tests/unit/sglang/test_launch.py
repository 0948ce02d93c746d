"""Rendering a configuration cannot be turned into command injection."""

from __future__ import annotations

import shlex
import subprocess

from hypothesis import given, settings
from hypothesis import strategies as st

from tuner.sglang.launch import LaunchCommand, ServerConfig, launch_command
from tuner.sglang.options import load_option_table

TABLE = load_option_table("0.5.23")
NASTY = ["a b", "it's", '"q"', "x; rm -rf /", "$(touch pwned)", "`id`", "line1\nline2", "--flag",
         "", "\\", "*"]


def test_flags_render_with_full_names_and_exact_values() -> None:
    config = ServerConfig.build({"--model-path": "m", "--mem-fraction-static": 0.85,
                                 "--enable-metrics": True,
                                 "--enable-tf32-matmul": False, "--cuda-graph-bs-decode": [1, 2, 4],
                                 "--disable-radix-cache": False})
    argv = config.argv(TABLE)
    assert argv == ["--model-path", "m", "--cuda-graph-bs-decode", "1", "2", "4",
                    "--enable-metrics", "--no-enable-tf32-matmul", "--mem-fraction-static", "0.85"]


def test_json_option_is_one_argument() -> None:
    config = ServerConfig.build({"--json-model-override-args": {"rope_scaling": {"factor": 4.0}}})
    assert config.argv(TABLE) == ["--json-model-override-args", '{"rope_scaling":{"factor":4.0}}']


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.sampled_from(NASTY), st.text(min_size=0, max_size=30)))
def test_any_value_survives_a_shell_round_trip(value: str) -> None:
    config = ServerConfig.build({"--model-path": value, "--served-model-name": value},
                                {"TOKEN": value})
    command = launch_command(["python3", "-m", "sglang.launch_server"], config, TABLE)
    assert shlex.split(command.shell()) == [f"TOKEN={value}", *command.argv]


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.sampled_from(NASTY),
                 st.text(alphabet=st.characters(blacklist_categories=["Cs", "Cc"])
                         | st.sampled_from("\n\t"), max_size=20)))
def test_multiline_rendering_is_the_same_command_for_sh(value: str) -> None:
    config = ServerConfig.build({"--model-path": value, "--tp-size": 2}, {"TOKEN": value})
    command = launch_command(["sh", "-c", 'printf "%s\\0" "$TOKEN" "$@"', "sh"], config, TABLE)
    out = subprocess.run(["sh", "-c", command.shell(multiline=True)], capture_output=True,
                         timeout=10, check=True).stdout
    assert out.split(b"\0")[:-1] == [value.encode(), *(a.encode() for a in command.args)]


def test_metacharacters_do_not_execute_in_a_real_shell(tmp_path) -> None:
    marker = tmp_path / "pwned"
    value = f"$(touch {marker}); touch {marker} `touch {marker}`\ntouch {marker}"
    command = LaunchCommand(("printf", "%s\\0"), ("--model-path", value))
    out = subprocess.run(["sh", "-c", command.shell()], capture_output=True, timeout=10,
                         check=True).stdout
    assert out.split(b"\0")[:-1] == [b"--model-path", value.encode()]
    assert not marker.exists()
