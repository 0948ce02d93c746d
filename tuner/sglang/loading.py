"""Refusals SGLang makes after its argument checks, while loading — judged before anything is
deployed.

A command line can pass every argument check (``prepare_server_args``, ``resolve_once``,
``check_server_args``) and still be refused once the server loads the draft model: the EAGLE-family
draft worker builds its attention backends from a table (``DraftBackendFactory`` in
srt/speculative/draft_utils.py; before 0.5.6 the EAGLE worker) and raises ``ValueError("EAGLE is not
supported in decode attention backend X")`` for a backend it lacks — ``--attention-backend
torch_native`` with EAGLE3, for one. That costs a restart of minutes on a real server.

Where the target's own SGLang can be asked, the resolver reads the table from the installed SGLang's
source (tuner/targets/resolver_script.py). Where it cannot, these copies of SGLang 0.5.23's tables
judge; the heavy tier (tests/integration/targets/test_resolver_real_sglang.py) holds them to the
real wheel's source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.sglang.resolution import RuleViolation

#: The algorithms whose draft worker builds its backends from the table.
DRAFT_TABLE_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")
#: SGLang 0.5.23's draft tables: the multi-step draft decode backend (built when steps > 1), and the
#: draft extend backend (from the prefill backend, or the decode one with
#: ``--speculative-attention-mode decode``).
DRAFT_DECODE_BACKENDS = frozenset({"flashinfer", "triton", "intel_amx", "intel_xpu", "aiter", "fa3",
                                   "hybrid_linear_attn", "flashmla", "trtllm_mha", "trtllm_mla",
                                   "cutedsl_mla", "dsa", "nsa", "ascend", "fa4", "dsv4"})
DRAFT_EXTEND_BACKENDS = DRAFT_DECODE_BACKENDS
DECODE_TEMPLATE = "EAGLE is not supported in decode attention backend {backend_type}"
EXTEND_TEMPLATE = "EAGLE is not supported in attention backend {backend_type}"


def draft_backend_refusal(args: Mapping[str, Any],
                          effective: Mapping[str, Any]) -> RuleViolation | None:
    """The ``ValueError`` loading the draft model raises for ``args`` (argparse dests) as SGLang
    resolved them (``effective``), or None."""
    if effective.get("speculative_algorithm") not in DRAFT_TABLE_ALGORITHMS:
        return None
    base = effective.get("attention_backend")
    draft = args.get("speculative_draft_attention_backend")
    decode = args.get("decode_attention_backend") or base
    prefill = args.get("prefill_attention_backend") or base
    steps = effective.get("speculative_num_steps")
    if steps is not None and steps > 1 and (draft or decode) not in DRAFT_DECODE_BACKENDS:
        return RuleViolation("draft-backend",
                             "ValueError: " + DECODE_TEMPLATE.format(backend_type=draft or decode))
    extend = draft or (decode if args.get("speculative_attention_mode") == "decode" else prefill)
    if extend is not None and extend not in DRAFT_EXTEND_BACKENDS:
        return RuleViolation("draft-backend",
                             "ValueError: " + EXTEND_TEMPLATE.format(backend_type=extend))
    return None
