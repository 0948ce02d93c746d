"""Small network helpers every layer may use: a free local port and one bounded HTTP GET."""

from __future__ import annotations

import http.client
import socket
from urllib.parse import urlsplit


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; another process may take it before us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def probe(base_url: str, path: str, timeout_s: float) -> int | None:
    """The HTTP status of ``GET base_url+path``, or None when nothing answered (refused, reset, timeout)."""
    parts = urlsplit(base_url)
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "127.0.0.1", parts.port, timeout=timeout_s)
    try:
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        response.read()
        return response.status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
