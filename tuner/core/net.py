"""Small network helpers every layer may use: a free local port and one bounded HTTP GET."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import ssl
import threading
import time
from urllib.parse import urlsplit

#: The probe only needs the status; a body beyond this is not read (nor kept), whatever
#: Content-Length says.
_MAX_BODY_BYTES = 64 * 1024


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it; another process may take it before
    us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def probe(base_url: str, path: str, timeout_s: float) -> int | None:
    """The HTTP status of ``GET base_url+path``, or None when nothing answered in time (refused,
    reset, or not a complete answer within ``timeout_s``)."""
    answer = ask(base_url, path, timeout_s)
    return answer if isinstance(answer, int) else None


def ask(base_url: str, path: str, timeout_s: float) -> int | str:
    """The HTTP status of ``GET base_url+path``, or why there is none, in words ("connection
    refused", "no complete answer within 20 s") — what ``probe`` reads as None.

    ``timeout_s`` bounds the whole operation — connect, TLS handshake, request, headers and (up to
    ``_MAX_BODY_BYTES`` of) body — not each socket read: a server that trickles one byte a second
    would otherwise hold a per-read timeout forever. A watchdog shuts the connection down at the
    deadline, which wakes whichever blocking read http.client is in.
    """
    deadline = time.monotonic() + timeout_s
    late = f"no complete answer within {timeout_s:g} s"
    parts = urlsplit(base_url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except TimeoutError:
        return f"no connection within {timeout_s:g} s"
    except OSError as exc:
        return _reason(exc)
    # shutdown(2) acts on the connection, not the descriptor: shutting down a duplicate from the
    # watchdog thread unblocks a read on the original (even once ssl has taken it over) without
    # racing its close.
    try:
        twin = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
    except OSError as exc:
        sock.close()
        return _reason(exc)
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _shut, args=(twin,))
    watchdog.daemon = True
    watchdog.start()
    conn: http.client.HTTPConnection | None = None
    try:
        if parts.scheme == "https":
            context = ssl.create_default_context()
            conn = http.client.HTTPSConnection(host, port, timeout=timeout_s, context=context)
            conn.sock = context.wrap_socket(sock, server_hostname=host)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
            conn.sock = sock
        conn.request("GET", path, headers={"Connection": "close"})
        response = conn.getresponse()
        received = 0
        while received < _MAX_BODY_BYTES:
            piece = response.read1(_MAX_BODY_BYTES - received)
            if not piece:
                break
            received += len(piece)
        # the watchdog cut the body short: not a complete answer in time
        if time.monotonic() > deadline:
            return late
        return response.status
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return late if time.monotonic() > deadline else _reason(exc)
    finally:
        watchdog.cancel()
        if conn is not None:
            conn.close()
        sock.close()
        twin.close()


def _reason(exc: BaseException) -> str:
    """An error in a few words: ``[Errno 111] Connection refused`` → ``connection refused``."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the probe may have finished and closed it already
        sock.shutdown(socket.SHUT_RDWR)
