"""Build (idempotently) the shared environment of real SGLang releases: CPU only, no GPU, PyPI only.

Layout (default root ``/work/.cache/sglang``, or ``$SPECTUNE_SGLANG_CACHE``)::

    base/                 one python3.11 venv: CPU torch + the packages SGLang's argument code
                          imports
    wheels/               the downloaded ``sglang-X-py3-none-any.whl`` files (``pip download
                          --no-deps``)
    releases/X/           each wheel unpacked; run it as ``PYTHONPATH=$(cat
                          releases/X/.pythonpath) base/bin/python``
    overlays/transformers-V/  a release's pinned transformers (``pip install --no-deps
                          --target``), where the base venv's transformers does not import that
                          release
    releases/X/.pythonpath    what to put on ``PYTHONPATH`` for release X (the wheel, then its
                          overlay if any); written once ``ServerArgs.add_cli_args`` worked for
                          that release

Usage::

    python3.11 bench/sglang_versions/env.py                       # the default spread of releases
    python3.11 bench/sglang_versions/env.py 0.5.23.post1 0.5.3    # these releases (base built
                                                                  # if missing)
    python3.11 bench/sglang_versions/env.py --list                # what is cached and which
                                                                  # releases import

Everything is cached: a second run downloads and installs nothing. This script only uses the
standard library so that it runs under any python3.11; the table and fixture generators run under
``base/bin/python``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

DEFAULT_ROOT = Path(os.environ.get("SPECTUNE_SGLANG_CACHE", "/work/.cache/sglang"))

# The spread of releases spectune ships option tables for (and a few older ones that are cheap to
# add).
DEFAULT_RELEASES = (
    "0.4.10.post2", "0.5.3", "0.5.6.post2", "0.5.10", "0.5.14", "0.5.17", "0.5.20", "0.5.22",
    "0.5.23",
)

# What SGLang's server_args / arg_groups import at module level (torchvision and sgl_kernel are
# stubbed by bench/sglang_fidelity/stubs.py: PyPI's torchvision does not load against a CPU torch,
# sgl_kernel is CUDA-only).
BASE_PACKAGES = (
    "torch==2.13.0", "numpy", "orjson", "psutil", "pybase64", "requests", "triton", "packaging",
    "pillow", "starlette", "msgspec", "pydantic", "pyzmq", "tqdm", "IPython", "aiohttp",
    "transformers==5.19.0",
    "tokenizers==0.23.2", "sentencepiece", "compressed-tensors", "gguf", "dill", "apache-tvm-ffi",
    "openai",
    "fastapi", "uvloop", "setproctitle", "einops", "huggingface_hub", "partial_json_parser",
    "interegular",
    "pyyaml", "blobfile", "prometheus-client", "uvicorn", "python-multipart", "pynvml",
    "nvidia-ml-py", "xgrammar",
)


def _run(cmd: list[str], **kw: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)  # type: ignore[call-overload]


def base_python(root: Path) -> Path:
    return root / "base" / "bin" / "python"


def ensure_base(root: Path) -> Path:
    python = base_python(root)
    marker = root / "base" / ".ok"
    wanted = " ".join(BASE_PACKAGES) + "\n"
    if marker.is_file() and marker.read_text(encoding="utf-8") == wanted:
        return python
    if not python.is_file():
        venv.EnvBuilder(with_pip=True).create(root / "base")
    _run([str(python), "-m", "pip", "install", "-q", *BASE_PACKAGES])
    marker.write_text(wanted, encoding="utf-8")
    return python


def ensure_release(root: Path, version: str) -> Path:
    """Download (once) and unpack (once) the wheel of ``version``; the release directory."""
    target = root / "releases" / version
    if (target / "sglang" / "__init__.py").is_file():
        return target
    wheels = root / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
              "-d", str(wheels), f"sglang=={version}"])
        found = sorted(wheels.glob(f"sglang-{version}-*.whl"))
    if not found:
        raise SystemExit(f"no wheel for sglang=={version} in {wheels}")
    partial = target.with_name(version + ".partial")
    with zipfile.ZipFile(found[0]) as z:
        z.extractall(partial)
    partial.rename(target)
    return target


def pinned_transformers(release: Path) -> str | None:
    """The ``transformers==V`` the release's wheel pins (its METADATA), if any."""
    for meta in release.glob("sglang-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8").splitlines():
            match = re.match(r"Requires-Dist: transformers==([\w.]+)", line)
            if match:
                return match.group(1)
    return None


def ensure_overlay(root: Path, transformers: str) -> Path:
    """A folder holding ``transformers==V`` and the tokenizers and huggingface-hub it accepts
    (``--no-deps --target``: the rest comes from the base venv). transformers checks their versions
    at import."""
    target = root / "overlays" / f"transformers-{transformers}"
    marker = target / ".ok"
    if marker.is_file():
        return target
    _run([str(base_python(root)), "-m", "pip", "install", "-q", "--no-deps", "--target",
          str(target), f"transformers=={transformers}"])
    wants = []
    for meta in target.glob("transformers-*.dist-info/METADATA"):
        for line in meta.read_text(encoding="utf-8").splitlines():
            match = re.match(r"Requires-Dist: ((?:tokenizers|huggingface-hub)[^;]*)$", line)
            if match:
                wants.append(match.group(1).replace(" ", ""))
    if wants:
        _run([str(base_python(root)), "-m", "pip", "install", "-q", "--no-deps", "--upgrade",
              "--target", str(target), *wants])
    marker.write_text(" ".join(wants) + "\n", encoding="utf-8")
    return target


def _try_import(root: Path, pythonpath: str) -> tuple[bool, str]:
    stubs = Path(__file__).resolve().parent.parent / "sglang_fidelity"
    code = (f"import sys; sys.path.insert(0, {str(stubs)!r}); import stubs; import "
            "sglang.srt.server_args as s; import argparse; p = argparse.ArgumentParser(); "
            "s.ServerArgs.add_cli_args(p); print(len(p._actions) - 1)")
    env = {**os.environ, "PYTHONPATH": pythonpath, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([str(base_python(root)), "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return proc.returncode == 0, proc.stdout.strip() if proc.returncode == 0 else (
        lines[-1] if lines else f"exit {proc.returncode}")


def release_pythonpath(root: Path, version: str) -> str | None:
    """The PYTHONPATH that runs ``version`` under the base venv (None: not set up or does not
    import)."""
    marker = root / "releases" / version / ".pythonpath"
    return marker.read_text(encoding="utf-8").strip() if marker.is_file() else None


def check_import(root: Path, version: str) -> str | None:
    """None when ``ServerArgs.add_cli_args`` runs for ``version`` (stubs on), else the error's last
    line.

    The release's own pinned transformers is tried first (SGLang registers model configs that newer
    transformers already define), then the base venv's."""
    if release_pythonpath(root, version) is not None:
        return None
    target = root / "releases" / version
    candidates = []
    pin = pinned_transformers(target)
    if pin is not None and f"transformers=={pin}" not in BASE_PACKAGES:
        candidates.append(f"{target}{os.pathsep}{ensure_overlay(root, pin)}")
    candidates.append(str(target))
    problem = ""
    for pythonpath in candidates:
        ok, problem = _try_import(root, pythonpath)
        if ok:
            (target / ".pythonpath").write_text(pythonpath + "\n", encoding="utf-8")
            return None
    return problem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("releases", nargs="*",
                    help=f"SGLang releases (default: {' '.join(DEFAULT_RELEASES)})")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--list", action="store_true", help="only report what is cached")
    opts = ap.parse_args()
    root: Path = opts.root
    releases = opts.releases or list(DEFAULT_RELEASES)
    if opts.list:
        releases = sorted(p.name for p in (root / "releases").glob("*")
                          if not p.name.endswith(".partial"))
    else:
        ensure_base(root)
    failed = 0
    for version in releases:
        if not opts.list:
            ensure_release(root, version)
        problem = check_import(root, version)
        if problem:
            failed += 1
        print(f"{version}: {'imports' if problem is None else 'does not import: ' + problem}",
              flush=True)
    print(
        f"run a release: PYTHONPATH=$(cat {root}/releases/<X>/.pythonpath) {base_python(root)} ...")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
