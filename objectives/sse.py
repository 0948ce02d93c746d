"""Server-Sent Events, decoded incrementally from the bytes a socket delivers.

Only what a token stream needs: ``data:`` fields joined per event, events dispatched on a blank
line. ``event:``, ``id:``, ``retry:`` and comment lines carry nothing a benchmark uses and are
skipped. The decoder is on the hot path (one call per socket read, many events per call at high
rates), so it works on bytes, splits once per read and never decodes text itself: ``json.loads``
takes the bytes of each event directly.
"""

from __future__ import annotations

#: An event larger than this is not a token chunk; refusing it keeps a broken server from eating
#: memory.
MAX_EVENT_BYTES = 1 << 20


class SSEError(ValueError):
    """The byte stream is not valid SSE (here: a line or event beyond ``MAX_EVENT_BYTES``)."""


class SSEDecoder:
    """Feed it raw bytes as they arrive; it returns the ``data`` payload of each event completed so
    far."""

    __slots__ = ("_data", "_size", "_tail")

    def __init__(self) -> None:
        self._tail = b""  # an incomplete last line, kept until its newline arrives
        self._data: list[bytes] = []  # data lines of the event being assembled
        self._size = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._tail:
            chunk = self._tail + chunk
        lines = chunk.split(b"\n")
        self._tail = lines.pop()
        if len(self._tail) > MAX_EVENT_BYTES:
            raise SSEError(f"an SSE line exceeds {MAX_EVENT_BYTES} bytes without a newline")
        events: list[bytes] = []
        data = self._data
        for line in lines:
            if line[-1:] == b"\r":  # CRLF line endings are legal SSE
                line = line[:-1]
            if not line:
                if data:
                    events.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data.clear()
                    self._size = 0
                continue
            if line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                data.append(value)
                self._size += len(value)
                if self._size > MAX_EVENT_BYTES:
                    raise SSEError(f"an SSE event exceeds {MAX_EVENT_BYTES} bytes")
        return events

    def close(self) -> list[bytes]:
        """End of stream: complete ``data`` lines of an event whose blank line never came are still
        returned.

        The SSE spec discards such an event; we keep it so a server omitting the final blank line
        loses nothing. A line cut before its newline is dropped: the stream then ends without
        ``[DONE]`` and the caller reports a truncated stream rather than a JSON error.
        """
        self._tail = b""
        if not self._data:
            return []
        return self.feed(b"\n\n")
