# mypy: ignore-errors
"""The resolver process: runs under the *target's* interpreter (any Python ≥ 3.9 with SGLang), never
spectune's.

``tuner.targets.resolver`` sends this file's text as ``python -c <text>`` — as a child process, or
over SSH — so it imports nothing from spectune. Protocol: one JSON line first (``{"version", "gpu",
"seams"}``, or ``{"unavailable": why}``), then one JSON answer per JSON request line: a list is a
server argv to judge, an object ``{"table": true}`` asks for the option table of this SGLang (its
``ServerArgs.add_cli_args`` on a fresh parser, dumped by tuner/sglang/dump.py, whose text is sent
ahead of this file's as ``DUMP_SOURCE``).

It never touches a GPU: ``CUDA_VISIBLE_DEVICES`` is emptied before torch is imported, so no CUDA
context can be created next to a running server. What SGLang's checks read about the GPU (name,
compute capability, memory) comes from ``nvidia-smi`` (the driver's tool, no CUDA context) or,
without it, from ``SPECTUNE_GPU`` (``[target] gpu``), and is shown to SGLang through the seams every
supported release has (``present``): torch's ``torch.cuda`` probes, patched before SGLang is
imported (releases up to 0.5.20 read them once, at import), SGLang's own memory helper, and — from
the release that has one — SGLang's ``override_platform``.
"""

import ast
import contextlib
import importlib
import importlib.util
import inspect
import io
import json
import logging
import os
import subprocess
import sys
import types


def say(data):
    print(json.dumps(data, default=str), flush=True)


def gpus():
    """``[(name, major, minor, memory_mb)]`` from nvidia-smi; else the one ``SPECTUNE_GPU``
    names."""
    rows = []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,compute_cap,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except Exception:
        out = ""
    for row in out.splitlines():
        parts = [p.strip() for p in row.split(",")]
        try:
            major, minor = (int(x) for x in parts[1].split("."))
            rows.append((parts[0], major, minor, int(float(parts[2]))))
        except (IndexError, ValueError):
            pass
    given = os.environ.get("SPECTUNE_GPU", "")
    if not rows and given:  # name|major.minor|memory_mb|count
        name, capability, memory, count = given.split("|")
        major, minor = (int(x) for x in capability.split("."))
        rows = [(name, major, minor, int(memory))] * int(count)
    return rows


def present(rows):
    """Show SGLang the GPU in ``rows`` without a device: torch's probes first (before SGLang is
    imported)."""
    import torch

    name, major, minor, memory_mb = rows[0]
    total = memory_mb * 1024 * 1024
    props = types.SimpleNamespace(name=name, major=major, minor=minor, total_memory=total,
                                  multi_processor_count=132,
                                  is_integrated=False, gcnArchName="", uuid="spectune-resolver",
                                  L2_cache_size=0)
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.device_count = lambda: len(rows)
    cuda.current_device = lambda: 0
    cuda.get_device_capability = lambda *a, **k: (major, minor)
    cuda.get_device_name = lambda *a, **k: name
    cuda.get_device_properties = lambda *a, **k: props
    cuda.mem_get_info = lambda *a, **k: (total, total)
    # a CPU build of torch (only where no GPU is anyway)
    if getattr(torch.version, "cuda", None) is None:
        torch.version.cuda = "12.9"
    return ["torch.cuda"]


def present_sglang(rows, seams):
    """SGLang's own helpers: its GPU memory probe, and the platform object of the releases that have
    one."""
    _name, major, minor, memory_mb = rows[0]
    for module in ("sglang.srt.utils.common", "sglang.srt.utils"):
        try:
            mod = importlib.import_module(module)
        except Exception:
            continue
        for helper in ("get_nvgpu_memory_capacity",):
            if hasattr(mod, helper):
                setattr(mod, helper, lambda: memory_mb)
                seams.append(f"{module}.{helper}")
    try:
        from sglang.srt.runtime_context import override_platform
    except ImportError:
        return seams
    facts = dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False,
                 is_mps=False, is_sm90=(major, minor) == (9, 0), is_sm100=major == 10,
                 is_sm100_or_sm110=major in (10, 11), is_sm110=major == 11, is_sm120=major == 12,
                 is_blackwell=major in (10, 11, 12), is_hopper_with_cuda_12_3=major == 9,
                 has_amx=False, has_flashinfer=importlib.util.find_spec("flashinfer") is not None,
                 device_sm=major * 10 + minor, device_capability=(major, minor))
    params = inspect.signature(override_platform).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        facts = {k: v for k, v in facts.items() if k in params}
    try:
        override_platform(**facts).install()
    except ValueError as exc:  # "unknown platform fact(s): [...]": a release that names fewer facts
        unknown = ast.literal_eval(str(exc).split(":", 1)[1].strip())
        override_platform(**{k: v for k, v in facts.items() if k not in unknown}).install()
    seams.append("sglang.srt.runtime_context.override_platform")
    return seams


def line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[-1]}" if text else type(exc).__name__


def view(args):
    """The values SGLang resolved (0.5.22+: through its resolving view; before: the arguments
    themselves)."""
    try:
        from sglang.srt.arg_groups.overrides import resolving_view
        return resolving_view(args)
    except Exception:
        return args


def effective(args):
    v = view(args)
    graphs = getattr(v, "cuda_graph_config", None)
    decode = getattr(graphs, "decode", None)
    max_bs = getattr(decode, "max_bs",
                     None) if decode is not None else getattr(v, "cuda_graph_max_bs", None)
    return {
        "speculative_algorithm": v.speculative_algorithm,
        "speculative_num_steps": v.speculative_num_steps,
        "speculative_eagle_topk": v.speculative_eagle_topk,
        "speculative_num_draft_tokens": v.speculative_num_draft_tokens, "page_size": v.page_size,
        "attention_backend": v.attention_backend,
        "cuda_graph_disabled": (str(getattr(decode, "backend", "")) in ("disabled",
                                                                        "Backend.DISABLED"))
        or bool(getattr(v, "disable_cuda_graph", False)),
        "cuda_graph_max_bs": max_bs,
        "max_running_requests": v.max_running_requests,
        "mem_fraction_static": getattr(v, "mem_fraction_static", None),
    }


#: The speculative algorithms whose draft worker builds its attention backends from SGLang's draft
#: backend table.
DRAFT_TABLE_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")


def draft_tables():
    """SGLang's draft attention backend tables, read from its source without importing it or loading
    a model: ``[(kind, backends, error template)]``, kind ``decode`` (the multi-step draft) or
    ``extend``. Every release builds them the same way — a ``backend_map = {...}`` dict in the draft
    worker's ``*decode_backend`` and ``*draft_extend_backend`` methods, refused with
    ``ValueError(template.format(backend_type=...))`` while the draft model loads
    (speculative/draft_utils.py from 0.5.6, speculative/eagle_worker.py before)."""
    for module in ("sglang.srt.speculative.draft_utils", "sglang.srt.speculative.eagle_worker"):
        try:
            spec = importlib.util.find_spec(module)
        except Exception:
            spec = None
        if spec is None or not spec.origin:
            continue
        tables = tables_in(spec.origin)
        if tables:
            return tables
    return []


def tables_in(path):
    """The draft backend tables in one source file (see ``draft_tables``), decode first."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read())
    tables = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or "backend" not in fn.name:
            continue
        keys = template = None
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and any(
                    isinstance(t, ast.Name) and t.id == "backend_map" for t in node.targets):
                keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            elif isinstance(node,
                            ast.Constant) and isinstance(node.value,
                                                         str) and "{backend_type}" in node.value:
                template = node.value
        if keys and template:
            tables.append(("decode" if "decode" in fn.name else "extend", keys, template))
    return sorted(tables, key=lambda t: t[0] != "decode")  # SGLang builds the decode backend first


def draft_refusal(v, tables):
    """SGLang's refusal of the draft attention backend, or None: what loading the draft model would
    raise."""
    if v.speculative_algorithm not in DRAFT_TABLE_ALGORITHMS:
        return None
    draft = getattr(v, "speculative_draft_attention_backend", None)
    decode = getattr(v, "decode_attention_backend", None) or v.attention_backend
    prefill = getattr(v, "prefill_attention_backend", None) or v.attention_backend
    for kind, backends, template in tables:
        if kind == "decode":
            if (v.speculative_num_steps or 0) <= 1:  # no multi-step draft backend
                continue
            backend = draft or decode
        else:
            backend = draft or (decode if getattr(v, "speculative_attention_mode", None) == "decode"
                                else prefill)
        if backend is not None and backend not in backends:
            return "ValueError: " + template.format(backend_type=backend)
    return None


def option_table():
    """``ServerArgs.add_cli_args`` on a fresh parser, as tuner/sglang/data stores it:
    tuner/sglang/dump.py, whose text ``tuner.targets.resolver`` puts before this file's as
    ``DUMP_SOURCE`` (one code path with the shipped tables' generator)."""
    namespace = {"__name__": "spectune_dump"}
    exec(compile(globals()["DUMP_SOURCE"], "tuner/sglang/dump.py", "exec"), namespace)
    return namespace["dump_sglang"]()


def judge(prepare, argv, tables=()):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = prepare(argv)
    except SystemExit as exc:
        lines = [x for x in err.getvalue().splitlines() if x.strip()]
        return {"verdict": "refused", "exit_code": int(exc.code or 0), "error": lines[-1] if lines
                else ""}
    # older releases resolve inside prepare_server_args (ServerArgs.__post_init__)
    except Exception as exc:
        return {"verdict": "refused", "exit_code": 1, "error": line(exc)}
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if hasattr(args, "resolve_once"):
                args.resolve_once()
            args.check_server_args()
    except Exception as exc:
        return {"verdict": "refused", "exit_code": 1, "error": line(exc)}
    refused = draft_refusal(view(args), tables)
    if refused is not None:
        return {"verdict": "refused", "exit_code": 1, "error": refused,
                "stage": "loading the draft model"}
    return {"verdict": "accepted", "effective": effective(args)}


def build():
    """Tells builds of one version apart: a hash of SGLang's server_args.py, read without importing
    more."""
    import hashlib

    spec = importlib.util.find_spec("sglang.srt.server_args")
    with open(spec.origin, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()[:16]


def main():
    rows = gpus()
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    seams = []
    try:
        if rows:
            seams += present(rows)
        import sglang
        if rows:
            present_sglang(rows, seams)
        # After the GPU is presented: SGLang caches what it probes at import.
        from sglang.srt.server_args import prepare_server_args
    except Exception as exc:
        say({"unavailable": line(exc),
             "version": getattr(sys.modules.get("sglang"), "__version__", None)})
        return
    logging.disable(logging.CRITICAL)
    version = getattr(sglang, "__version__", None)
    tables = draft_tables()
    say({"version": version, "gpu": rows[0][0] if rows else None, "seams": seams, "build": build(),
         "draft_tables": [kind for kind, _, _ in tables]})
    for raw in sys.stdin:
        request = json.loads(raw)
        if isinstance(request, dict) and request.get("table"):
            try:
                say({"table": option_table()})
            except Exception as exc:
                say({"table": None, "error": line(exc)})
            continue
        say(judge(prepare_server_args, request, tables))


if __name__ == "__main__":
    main()
