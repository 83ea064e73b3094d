#!/usr/bin/env python3
"""Serve a Redfish mockup tree over HTTP with basic auth, for the molecule scenario only.

``/redfish/v1/X`` is answered with ``<root>/X/index.json`` (the layout of DMTF's mockups and
of tests/fixtures/redfish). Files are read per request, so rewriting one (a leak detector's
DetectorState) changes what the exporter sees at its next poll. The service root answers
without authentication (DSP0266); everything else needs basic auth with the
``user:password`` line of the credentials file.

    redfish_mockup.py --root /srv/redfish-mockup --port 8000 --credentials FILE
"""

import argparse
import base64
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def make_handler(root, token):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):  # the journal stays readable
            pass

        def reply(self, code, body):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?", 1)[0].rstrip("/")
            if not path.startswith("/redfish/v1") or ".." in path:
                return self.reply(404, b'{"error": "not found"}')
            if path != "/redfish/v1" and self.headers.get("Authorization") != token:
                return self.reply(401, b'{"error": "unauthorized"}')
            file = root / path[len("/redfish/v1"):].strip("/") / "index.json"
            if not file.is_file():
                return self.reply(404, b'{"error": "not found"}')
            return self.reply(200, file.read_bytes())

    return Handler


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, type=Path)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--listen", default="0.0.0.0")
    ap.add_argument("--credentials", required=True, type=Path, help="file with user:password")
    args = ap.parse_args()
    creds = args.credentials.read_text(encoding="utf-8").rstrip("\n")
    token = "Basic " + base64.b64encode(creds.encode()).decode()
    server = ThreadingHTTPServer((args.listen, args.port), make_handler(args.root, token))
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
