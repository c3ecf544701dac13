"""haproxy (the Debian package) in front of revopsd API nodes, for the
multi-node suites and benchmarks: HTTP mode, round robin per request,
each node health-checked on GET /readyz.

    lb = Haproxy([("api1", 127.0.0.1, port1), ("api2", "127.0.0.1", port2)], tmpdir)
    lb.port   # the front end, 127.0.0.1:<free port>
    lb.close()
"""

import os
import shutil
import socket
import subprocess
import time

CONFIG = """global
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
frontend api
  bind 127.0.0.1:%(port)d
  default_backend nodes
backend nodes
  balance roundrobin
  option httpchk GET /readyz
%(servers)s
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Haproxy:
    def __init__(self, servers, tmpdir, check_ms=500):
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not os.access(binary, os.X_OK):
            raise RuntimeError("haproxy is not installed (scripts/install-deps.sh installs it)")
        self.port = free_port()
        self.path = os.path.join(tmpdir, "haproxy.cfg")
        lines = ["  server %s %s:%d check inter %dms fall 2 rise 1" % (name, host, port, check_ms)
                 for name, host, port in servers]
        with open(self.path, "w") as f:
            f.write(CONFIG % {"port": self.port, "servers": "\n".join(lines)})
        self.log = open(os.path.join(tmpdir, "haproxy.log"), "wb")
        self.proc = subprocess.Popen([binary, "-db", "-f", self.path], stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("haproxy exited with %s; see %s" % (
                    self.proc.returncode, self.log.name))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.close()
        raise RuntimeError("haproxy did not listen on %d within 10 s" % self.port)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
