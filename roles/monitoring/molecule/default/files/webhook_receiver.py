#!/usr/bin/env python3
"""Webhook receiver for the monitoring molecule scenario (stands in for a site's alert sink).

Listens on 127.0.0.1:PORT; every POST body that is a JSON document is appended, as one
line, to the log file (Alertmanager's webhook payload: version 4, status, alerts[] with
labels). Anything else is answered 400 and logged as {"invalid": "<reason>"}, so a test
sees it. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
MAX_BODY = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=9099)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._record({"invalid": f"body of {length} bytes"}, 413)
                return
            body = self.rfile.read(length)
            try:
                document = json.loads(body)
            except ValueError as exc:
                self._record({"invalid": f"not JSON: {exc}"}, 400)
                return
            self._record(document, 200)

        def _record(self, document: object, status: int) -> None:
            with LOCK, open(args.log, "a", encoding="utf-8") as log:
                log.write(json.dumps(document, sort_keys=True) + "\n")
            self.send_response(status)
            self.end_headers()

        def log_message(self, format: str, *values: object) -> None:  # noqa: A002
            pass

    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
