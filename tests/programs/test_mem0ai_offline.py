"""`--system mem0ai` runs offline: in a fresh process whose sockets refuse every address but loopback (DNS look-ups
included), with Mem0's telemetry and home directory left at their defaults, a traced run completes without one
refused connection, and writes nothing outside its run directory that a run of our own `mem0` program does not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from required import need_mem0ai

GUARD = r'''
import ipaddress, json, socket, sys

refused = []

def loopback(host):
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False

def guard(real):
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not loopback(address[0]):
            refused.append(repr(address))
            raise ConnectionRefusedError(f"refused: {address!r} is not loopback")
        return real(self, address)
    return connect

socket.socket.connect = guard(socket.socket.connect)
socket.socket.connect_ex = guard(socket.socket.connect_ex)
real_getaddrinfo = socket.getaddrinfo

def getaddrinfo(host, *args, **kwargs):
    if host is not None and not loopback(host):
        refused.append(f"dns {host}")
        raise socket.gaierror(f"refused: {host} is not loopback")
    return real_getaddrinfo(host, *args, **kwargs)

socket.getaddrinfo = getaddrinfo

from memtrace_opt.cli import run_cli

code = run_cli(sys.argv[1:])
print(json.dumps({"code": code, "refused": refused}))
'''


def _files(root: Path, skip: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and skip not in p.parents}


def _run(system: str, sandbox: Path) -> tuple[dict, set[str]]:
    home, tmp, work = (sandbox / name for name in ("home", "tmp", "work"))
    for folder in (home, tmp, work):
        folder.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEM0_")}
    env.update(HOME=str(home), TMPDIR=str(tmp), LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = work / "run"
    done = subprocess.run(
        [sys.executable, "-c", GUARD, "run", "--system", system, "--data", "sample", "--lm", "fake", "--no-judge",
         "-q", "--limit", "3", "--out", str(out)],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (out / "graphs" / "sample-1.json").is_file()
    return report, _files(sandbox, out)


def test_a_run_makes_no_connection_but_loopback_and_writes_nothing_of_its_own_outside_the_run(tmp_path):
    need_mem0ai("2.")
    report, outside = _run("mem0ai", tmp_path / "mem0ai")
    assert report == {"code": 0, "refused": []}
    baseline, ours = _run("mem0", tmp_path / "mem0")
    assert baseline["refused"] == []
    assert outside <= ours, sorted(outside - ours)  # e.g. no .mem0/ in the home directory, nothing left in TMPDIR
