"""A free local port for the servers and process groups tests start: a fixed port fails the test
whenever another job on the machine holds it."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice; it may be taken again before use, which
    on a test machine is rare enough that the tests do not retry)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
