"""``[target] hosts`` and ``[study] heartbeat_*``: validation in one line each, and the one-host
view a worker deploys to."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.study.test_study_file import VALID, problems_of, write
from tuner.app.tune import worker_seed
from tuner.core.errors import UsageError
from tuner.study.hosts import check_host, hosts_of, spec_for_host
from tuner.study.load import load_study_file

PG = 'storage = "postgresql+psycopg://u@127.0.0.1:5432/db"\n'


def text(*, hosts: str | None = None, storage: str = PG, study_extra: str = "",
         target_extra: str = "") -> str:
    out = VALID.replace("seed = 1\n", "seed = 1\n" + storage + study_extra)
    if hosts is not None:
        out = out.replace("time_scale = 10.0\n", f"time_scale = 10.0\nhosts = {hosts}\n")
    return out.replace("time_scale = 10.0\n", "time_scale = 10.0\n" + target_extra)


SYSTEMD = """
[target]
kind = "systemd-ssh"
unit = "sglang.service"
command = ["python3", "-m", "sglang.launch_server"]
"""


def systemd_text(lines: str) -> str:
    return text().replace('[target]\nkind = "simulated"\ntime_scale = 10.0\n', SYSTEMD + lines)


BROKEN = {
    "empty": (text(hosts="[]"), "target.hosts", "must not be empty"),
    "twice": (text(hosts='["a", "b", "a"]'), "target.hosts", "'a' is listed twice"),
    "not-a-name": (text(hosts='["a b"]'), "target.hosts", "not a host name"),
    "not-strings": (text(hosts="[1, 2]"), "target.hosts", "must be a list of strings"),
    "sqlite-with-several": (text(hosts='["a", "b"]', storage=""), "target.hosts",
                            "2 hosts need a PostgreSQL [study] storage"),
    "fixed-port-with-several": (text(hosts='["a", "b"]', target_extra="port = 31000\n"),
                                "target.port", "must be 0 with several hosts"),
    "host-and-hosts": (systemd_text('host = "gpu1"\nhosts = ["gpu1", "gpu2"]\n'), "target.host",
                       "set host or hosts, not both"),
    "neither-host": (systemd_text(""), "target.host", "missing (required)"),
    "shared-server-host": (systemd_text('hosts = ["gpu1", "gpu2"]\nserver_host = "lb"\n'),
                           "target.server_host", "cannot be set with several hosts"),
    "hosts-on-local": (text().replace('kind = "simulated"\ntime_scale = 10.0\n',
                                      'kind = "local"\ncommand = ["x"]\nhosts = ["a"]\n'),
                       "target.hosts", "unknown key"),
    "short-grace": (text(study_extra='heartbeat_interval = "30s"\nheartbeat_grace = "40s"\n'),
                    "study.heartbeat_grace", "at least twice heartbeat_interval (60 s), not 40 s"),
    "empty-host": (systemd_text('host = ""\n'), "target.host", "not a host name: ''"),
    "empty-host-in-list": (text(hosts='["a", ""]'), "target.hosts", "not a host name: ''"),
    "empty-listen-host": (systemd_text('host = "gpu1"\nlisten_host = " "\n'), "target.listen_host",
                          "not a host name: ' '"),
    "bad-interval": (text(study_extra='heartbeat_interval = "soon"\n'), "study.heartbeat_interval",
                     "cannot read duration"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_bad_hosts_and_heartbeats_are_one_line_each(tmp_path: Path, kind: str) -> None:
    body, key, fragment = BROKEN[kind]
    lines = problems_of(tmp_path, body)
    matching = [line for line in lines if fragment in line and line.split(": ", 2)[1] == key]
    assert matching, (fragment, lines)
    assert all("\n" not in line for line in lines)


def test_hosts_and_heartbeat_are_read(tmp_path: Path) -> None:
    spec = load_study_file(write(tmp_path, text(hosts='["sim-a", "sim-b"]',
                                                study_extra='heartbeat_interval = "2s"\n')))
    assert spec.target.hosts == ("sim-a", "sim-b") and hosts_of(spec) == ("sim-a", "sim-b")
    # grace: 5 beats
    assert (spec.study.heartbeat_interval_s, spec.study.heartbeat_grace_s) == (2, 10)
    one = spec_for_host(spec, "sim-b")
    assert one.target.hosts == ("sim-b",)
    assert one.target.settings.log_dir.endswith("logs/sim-b")  # its own pid file and logs
    assert spec_for_host(spec, "sim-a").target.settings.log_dir != one.target.settings.log_dir
    assert check_host(spec, "sim-a") == "sim-a"
    with pytest.raises(UsageError, match=r"--host 'gpu9' is not a host of study 't' \(\[target\] "
                                         r"hosts: sim-a, sim-b"):
        check_host(spec, "gpu9")


def test_systemd_hosts_become_the_ssh_host(tmp_path: Path) -> None:
    spec = load_study_file(write(tmp_path, systemd_text('hosts = ["gpu1", "gpu2"]\n')))
    assert spec_for_host(spec, "gpu2").target.settings.host == "gpu2"
    single = load_study_file(write(tmp_path, systemd_text('host = "gpu1"\n'), "single.toml"))
    assert hosts_of(single) == ("gpu1",) and spec_for_host(single, "gpu1") is single


def test_workers_get_distinct_reproducible_seeds() -> None:
    seeds = {worker_seed(7, h) for h in ("a", "b", "c")}
    assert len(seeds) == 3 and worker_seed(7, "a") == worker_seed(7, "a")
    assert worker_seed(None, "a") is None
