"""A throwaway OpenSSH server on 127.0.0.1 for the remote-host tests.

``/usr/sbin/sshd -D -e -f <config>`` on a free port with its own host key and a user
key made here (ssh-keygen, in a private folder): root may log in with that key only,
``StrictModes no`` (the folder is under /tmp), no PAM. The ``sshd`` fixture in
conftest.py starts one for the whole session and stops it at the end.

``start_sshd(listen="127.0.0.2")`` gives a second host on another loopback address (Linux
answers on all of 127.0.0.0/8). ``hosts_entry()`` is a scenario's ``hosts:`` value that reaches it;
``session_processes()`` lists what still runs in its sessions (each connection gets
its own sshd child; commands run under those).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

SSHD = Path("/usr/sbin/sshd")
# sshd refuses to start without its privilege separation folder; no systemd makes it here.
PRIVSEP_DIR = Path("/run/sshd")


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


@dataclass
class Sshd:
    folder: Path
    address: str  # where it listens (a loopback address)
    port: int
    user_key: Path
    process: subprocess.Popen

    def hosts_entry(self, **changes: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "ssh": f"root@{self.address}",
            "port": self.port,
            "options": {
                "IdentityFile": str(self.user_key),
                "IdentitiesOnly": "yes",
                "UserKnownHostsFile": str(self.folder / "known_hosts"),
                "StrictHostKeyChecking": "accept-new",
            },
        }
        entry.update(changes)
        return entry

    def session_processes(self) -> list[psutil.Process]:
        """Every live process under the listener: sessions and their commands."""
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        return [p for p in children if _alive(p)]

    def runs(self, name: str, *args: str) -> bool:
        """A process called ``name``, with each of ``args`` on its command line, runs in a
        session (one that just ended does not)."""
        for process in self.session_processes():
            try:
                if process.name() == name and all(a in process.cmdline() for a in args):
                    return True
            except psutil.NoSuchProcess:
                continue
        return False

    def wait_sessions_gone(self, timeout: float = 30.0) -> list[str]:
        """Wait for every session to end; describe what is still there."""
        deadline = time.monotonic() + timeout
        while (left := self.session_processes()) and time.monotonic() < deadline:
            time.sleep(0.2)
        described = []
        for p in left:
            try:
                described.append(f"{p.pid} {' '.join(p.cmdline())[:160]}")
            except psutil.NoSuchProcess:
                continue
        return described


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class _SshdExited(RuntimeError):
    pass


# The port is free when chosen, but another test's server may bind it before sshd does.
PORT_ATTEMPTS = 3


def start_sshd(listen: str = "127.0.0.1") -> Sshd:
    folder = Path(tempfile.mkdtemp(prefix="dbrig-sshd-", dir="/tmp"))
    _keygen(folder / "host_key")
    _keygen(folder / "user_key")
    shutil.copy(folder / "user_key.pub", folder / "authorized_keys")
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = _free_port(listen)
        process = _spawn_sshd(folder, listen, port)
        try:
            _wait_listening(listen, port, process, folder)
        except _SshdExited:
            if attempt == PORT_ATTEMPTS:
                raise
            continue
        return Sshd(folder, listen, port, folder / "user_key", process)
    raise AssertionError("unreachable")


def _spawn_sshd(folder: Path, listen: str, port: int) -> subprocess.Popen:
    config = folder / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                f"ListenAddress {listen}",
                f"HostKey {folder / 'host_key'}",
                "PidFile none",
                f"AuthorizedKeysFile {folder / 'authorized_keys'}",
                "StrictModes no",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "AllowTcpForwarding yes",
                "MaxSessions 50",
                "",
            ]
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBRIG")}
    return subprocess.Popen(
        [str(SSHD), "-D", "-e", "-f", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=open(folder / "sshd.log", "ab"),  # the child keeps it
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )


def _wait_listening(address: str, port: int, process: subprocess.Popen, folder: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _SshdExited(f"sshd exited: {(folder / 'sshd.log').read_text()}")
        with socket.socket() as s:
            if s.connect_ex((address, port)) == 0:
                return
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError("sshd did not listen within 30 s")


def stop_sshd(sshd: Sshd) -> None:
    sshd.process.terminate()
    try:
        sshd.process.wait(10)
    except subprocess.TimeoutExpired:
        sshd.process.kill()
        sshd.process.wait()
    shutil.rmtree(sshd.folder, ignore_errors=True)
