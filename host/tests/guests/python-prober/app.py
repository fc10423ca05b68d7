"""Hostile Python guest: tries the authority the filesystem and sockets a Python component
must import might carry, and fails its activation if any of it works. It lists the
directories it can see (there is no preopened one), opens files by absolute and relative
paths, creates TCP (v4 and v6) and UDP sockets, connects to loopback, and resolves a name;
every attempt must fail. It returns ok
with nothing found, and its log (stdout) says what each attempt raised."""

import encodings.idna  # noqa: F401 - so a host name reaches the host's name lookup
import os
import socket

from ahp_agent import Agent, delegation, export, snapshot


def attempts():
    yield "listdir /", lambda: os.listdir("/")
    yield "listdir .", lambda: os.listdir(".")
    yield "open /etc/passwd", lambda: open("/etc/passwd", "rb").read(1)
    yield "open token-key", lambda: open("token-key", "rb").read(1)
    yield "write /tmp/x", lambda: open("/tmp/x", "wb").write(b"x")
    yield "tcp socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    yield "tcp6 socket", lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    yield "tcp connect", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1)
    yield "udp socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", 9))
    yield "getaddrinfo", lambda: socket.getaddrinfo("localhost", 80)


class Prober(Agent):
    def resume(self):
        reached = []
        for what, attempt in attempts():
            try:
                result = attempt()
            except Exception as e:  # noqa: BLE001 - every failure is what we hope for
                print(f"{what}: refused ({type(e).__name__}: {e})")
            else:
                print(f"{what}: REACHED {result!r}")
                reached.append(what)
        # Not authority, but what an author must know: can a module that was not imported at
        # build time still be imported in the sandbox?
        try:
            __import__("csv")
            print("lazy import: ok")
        except Exception as e:  # noqa: BLE001
            print(f"lazy import: failed ({type(e).__name__}: {e})")
        # The SDK's page bound is the host's: at it, a page; one past it, the WIT's refusal.
        print(f"snapshot page of MAX_PAGE: {len(snapshot.messages_page(0, snapshot.MAX_PAGE))} messages")
        try:
            snapshot.messages_page(0, snapshot.MAX_PAGE + 1)
            print("snapshot page past MAX_PAGE: REACHED")
        except snapshot.Error as e:
            print(f"snapshot page past MAX_PAGE: {e.kind} {e.detail}")
        # The delegation module outside a turn: refused, with the WIT's kind.
        try:
            delegation.list_tasks_page(delegation.TaskRole.ASSIGNED)
            print("delegation outside a turn: REACHED")
        except delegation.Error as e:
            print(f"delegation outside a turn: {e.kind}")
        if reached:
            raise RuntimeError("reached " + ", ".join(reached))


WitWorld = export(Prober)
