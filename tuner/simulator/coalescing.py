"""Coalescing: how many SSE events the engine (tuner/simulator/engine.py) may send.

At a high time scale one chunk per request per iteration is more SSE events than Python
can send and a client can read on a shared CPU (~38k/s at C=64 and 50×), and the host's load then
decides the figures. So the engine also waits until ``batch · time_scale / EVENT_BUDGET_PER_S``
simulated seconds have passed since a request's last chunk: fewer, larger chunks carrying the same
tokens at the scheduled time of the iteration that completed them. A client's per-request speed
(tokens between its first and last chunk) and aggregate are unchanged; ITL and tokens per chunk then
describe the coalesced stream. At time scale 1 nothing coalesces.
"""

#: SSE events per real second the engine aims to stay under (all requests together) by coalescing
#: chunks. An event costs the server ~100-200 µs (mostly its send syscall) and the client as much
#: again: at C=64 and 10× (6k events/s uncoalesced) that is most of a core, which a shared machine
#: does not give. At 1000 events/s both stay near a tenth of a core; what it costs is the tokens a
#: window's end finds held back (about half a chunk per running request: ~1 % of a C=64 window at
#: 10×).
EVENT_BUDGET_PER_S = 1000.0
#: Chunks a request is streamed in at least, however much coalescing would merge (a short request at
#: a high time scale would otherwise be its first and last chunk only).
MIN_CHUNKS = 8
#: From this time scale on, the engine pauses this long (real time) after streaming first chunks.
FIRST_CHUNK_PAUSE_FROM_SCALE = 50.0
FIRST_CHUNK_PAUSE_S = 0.002
