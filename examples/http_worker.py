"""A JQ master worker in standard-library Python: an HTTP server and JSON, nothing else.

    fairque master                                       # in one shell
    python examples/http_worker.py http://127.0.0.1:8080 8090

Any language works the same way: register (and heartbeat) with PUT /workers/{id}, answer
POST /run with the result object. It registers in JSON, so the master sends it JSON.
This one serves the job "add" (the sum of a list of numbers).
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MASTER, PORT = sys.argv[1], int(sys.argv[2])
JSON = {"Content-Type": "application/json"}


class Worker(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # POST /run: one job in, one result object out
        job = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        now = datetime.now(timezone.utc).isoformat()
        if job["name"] == "add" and isinstance(job["argument"], list):
            reply = {"type": "success", "finished_at": now, "result": sum(job["argument"])}
        else:
            reply = {"type": "failure", "finished_at": now, "reason": "other", "error": None,
                     "should_retry": False, "message": "add takes a list"}  # fmt: skip
        body = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", JSON["Content-Type"])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def heartbeat() -> None:
    """Registers, then beats as often as the master asks. While the master is away
    (restarting, unreachable) it says so once and tries again every second: the first
    beat that gets through registers the worker again."""
    me = json.dumps({"url": f"http://127.0.0.1:{PORT}", "names": ["add"], "capacity": 8})
    address = f"{MASTER}/workers/example-{PORT}"
    away = False
    while True:
        request = urllib.request.Request(address, me.encode(), JSON, method="PUT")  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - the master's URL
                every = json.load(answer)["heartbeat"]
        except (OSError, ValueError, KeyError) as exc:  # URLError is an OSError
            if not away:
                print(f"http_worker.py: master unreachable ({exc}); retrying", file=sys.stderr,
                      flush=True)  # fmt: skip
            away, every = True, 1.0
        else:
            if away:
                print("http_worker.py: registered again", file=sys.stderr, flush=True)
            away = False
        time.sleep(every)


threading.Thread(target=heartbeat, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", PORT), Worker)
print(f"http_worker.py: serving add at http://127.0.0.1:{PORT} for {MASTER} (Ctrl-C stops)",
      file=sys.stderr, flush=True)  # fmt: skip
server.serve_forever()
