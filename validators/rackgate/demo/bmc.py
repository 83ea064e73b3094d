"""Simulated BMCs for the demo rack and the live tests: real protocols on loopback.

- IPMI: Debian's ``ipmi_sim`` (package openipmi) with the project's lan.conf, .emu and
  .sdrs (``molecule/demo-bmc/ipmi_sim``, from the handbook's PROBES.md), queried by the
  real ``ipmitool``; faults are set at run time through its console port.
- Redfish: a static mockup tree served over HTTP with basic auth, the layout of DMTF's
  mockups (``<root>/X/index.json`` is ``/redfish/v1/X``); files are re-read per request, so
  rewriting one (a leak detector's state) is a fault injected at run time.

``python -m rackgate.demo.bmc redfish --root DIR --port N`` serves until killed; the
expected user and password come from RACKGATE_BMC_USER / RACKGATE_BMC_PASSWORD.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import shutil
import socket
import subprocess
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def redfish_handler(root: Path, user: str, password: str,
                    delay_s: float = 0.0) -> type[BaseHTTPRequestHandler]:
    """A request handler serving the mockup tree ``root`` as ``/redfish/v1``."""
    token = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            # the client may have given up (a timeout): nothing left to answer
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(body)

        def do_GET(self) -> None:
            time.sleep(delay_s)
            path = self.path.split("?", 1)[0].rstrip("/")
            if not path.startswith("/redfish/v1") or ".." in path:
                return self._send(404, b'{"error": "not found"}')
            # DSP0266: the service root answers without authentication; nothing else does
            if path != "/redfish/v1" and self.headers.get("Authorization") != token:
                return self._send(401, b'{"error": "unauthorized"}')
            file = root / path.removeprefix("/redfish/v1").strip("/") / "index.json"
            if not file.is_file():
                return self._send(404, b'{"error": "not found"}')
            return self._send(200, file.read_bytes())

    return Handler


def serve_redfish(root: Path, port: int, user: str, password: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), redfish_handler(root, user, password))
    server.daemon_threads = True
    server.serve_forever()


IPMI_SIM_FILES = Path(__file__).resolve().parents[3] / "molecule" / "demo-bmc" / "ipmi_sim"


class BmcError(RuntimeError):
    pass


def _read_prompt(c: socket.socket, timeout_s: float = 5.0) -> bool:
    """Read up to the console's '>' prompt; False when it did not come in time."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while not data.rstrip().endswith(b">") and time.monotonic() < deadline:
        try:
            chunk = c.recv(4096)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data.rstrip().endswith(b">")


def ipmi_console(port: int, command: str) -> None:
    """Run one emulator command (as in the .emu file, e.g. ``sensor_set_bit 0x20 0 2 1 1
    1``) through ipmi_sim's console on 127.0.0.1."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.settimeout(5)
        if not _read_prompt(c):
            raise BmcError(f"no prompt on the ipmi_sim console 127.0.0.1:{port}")
        c.sendall(command.encode() + b"\n")
        if not _read_prompt(c):  # the echo and the next prompt: the command has run
            raise BmcError(f"the ipmi_sim console on port {port} did not take {command!r}")


def start_ipmi_sim(work_dir: Path, lan_port: int, console_port: int,
                   files: Path = IPMI_SIM_FILES) -> subprocess.Popen[bytes]:
    """Start ipmi_sim on 127.0.0.1 with a fresh state under ``work_dir`` (the SEL and SDRs
    persist there) and wait, at most 5 s, until its console prompts."""
    tools = {t: shutil.which(t) for t in ("ipmi_sim", "sdrcomp")}
    missing = [t for t, path in tools.items() if path is None]
    if missing:
        raise BmcError(f"{', '.join(missing)} not installed: apt-get install -y openipmi")
    conf = (files / "lan.conf").read_text(encoding="utf-8")
    conf = conf.replace("addr 127.0.0.1 9623", f"addr 127.0.0.1 {lan_port}")
    conf = conf.replace("console 127.0.0.1 9624", f"console 127.0.0.1 {console_port}")
    shutil.rmtree(work_dir / "state", ignore_errors=True)
    sdr_dir = work_dir / "state" / "ipmi_sim" / "gpusim"
    sdr_dir.mkdir(parents=True)
    (work_dir / "lan.conf").write_text(conf, encoding="utf-8")
    subprocess.run([str(tools["sdrcomp"]), "-o", str(sdr_dir / "sdr.20.main"),
                    str(files / "gpusim.sdrs")], check=True, capture_output=True, timeout=30)
    log = work_dir / "ipmi_sim.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(tools["ipmi_sim"]), "-c", str(work_dir / "lan.conf"), "-f",
             str(files / "gpusim.emu"), "-s", str(work_dir / "state"), "-n"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=work_dir,
            start_new_session=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # bounded: the console prompts once the MC answers
        if proc.poll() is not None:
            raise BmcError(f"ipmi_sim exited with rc {proc.returncode}: "
                           f"{log.read_text(errors='replace')[-1000:]}")
        try:
            with socket.create_connection(("127.0.0.1", console_port), timeout=0.5) as c:
                c.settimeout(0.5)
                if _read_prompt(c, 0.5):
                    return proc
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise BmcError(f"ipmi_sim did not open its console port {console_port} within 5 s: "
                   f"{log.read_text(errors='replace')[-1000:]}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m rackgate.demo.bmc")
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("redfish", help="serve a Redfish mockup tree on 127.0.0.1")
    r.add_argument("--root", required=True, type=Path)
    r.add_argument("--port", required=True, type=int)
    args = p.parse_args(argv)
    user = os.environ.get("RACKGATE_BMC_USER", "")
    password = os.environ.get("RACKGATE_BMC_PASSWORD", "")
    if not user or not password:
        p.error("set RACKGATE_BMC_USER and RACKGATE_BMC_PASSWORD")
    serve_redfish(args.root, args.port, user, password)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
