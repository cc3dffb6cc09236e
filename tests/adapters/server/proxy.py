"""A stand-in *process* for a server executable: ``python proxy.py --to URL --port P [any other flags]`` listens on
127.0.0.1:P and relays every request to ``URL`` (a ``StandIn`` running in the test's own process), answering with
its status and body. Standard library only, so it starts in a fraction of a second: managed-mode tests start and
stop real processes from their templates without paying an engine's (or torch's) import per server. The other
flags are the executable's own (e.g. llama-server's ``-m``, ``-np``), taken and ignored; the test reads them from
the launch line."""

import argparse
import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


def serve(to: str, port: int) -> None:
    target = urlsplit(to)

    class Relay(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def _relay(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                conn.request(method, self.path, body=body, headers={"Content-Type": "application/json"})
                answer = conn.getresponse()
                payload = answer.read()
            except OSError:
                self.close_connection = True
                return
            finally:
                conn.close()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self):
            self._relay("GET")

        def do_POST(self):
            self._relay("POST")

    server = ThreadingHTTPServer(("127.0.0.1", port), Relay)
    server.daemon_threads = True
    server.serve_forever(0.05)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--to", required=True)
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args(argv)
    serve(args.to, args.port)


if __name__ == "__main__":
    main(sys.argv[1:])
