"""Raw HTTP against the simulator process: every endpoint, SGLang's bodies and status codes."""

from __future__ import annotations

import itertools
import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from tests.integration.simulator.conftest import SPEC
from tuner.simulator.process import RunningSimulator, http_status, running_simulator


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post(url: str, body: object | bytes) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def events(raw: bytes) -> list[Any]:
    """SSE ``data:`` payloads, ``[DONE]`` kept as the string."""
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            payload = block[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def metric(text: str, name: str) -> float:
    line = next(line for line in text.splitlines() if line.startswith(f"sglang:{name}{{"))
    assert 'model_name="sim-model"' in line
    return float(line.rsplit(" ", 1)[1])


def test_health_ready_and_model_info(sim: RunningSimulator) -> None:
    for path in ("/health", "/health_generate", "/ready"):
        assert get(sim.url + path)[0] == 200, path
    status, body = get(sim.url + "/model_info")
    info = json.loads(body)
    assert status == 200 and info["model_path"] == "Qwen/Qwen3.5-122B-A10B" \
           and info["is_generation"] is True
    assert info["served_model_name"] == "sim-model" and info["architectures"]
    models = json.loads(get(sim.url + "/v1/models")[1])
    assert models["object"] == "list" and models["data"][0]["id"] == "sim-model"
    assert models["data"][0]["owned_by"] == "sglang" and models["data"][0]["max_model_len"] > 0


def test_server_info_has_resolved_args_and_internal_state(sim: RunningSimulator) -> None:
    # Enough decode iterations for one --decode-log-interval (5 here) so the average exists.
    post(sim.url + "/generate",
         {"text": "warm the average up", "sampling_params": {"max_new_tokens": 40,
                                                             "ignore_eos": True}})
    info = json.loads(get(sim.url + "/server_info")[1])
    assert info["version"] == "0.5.23"
    assert info["speculative_num_draft_tokens"] == 4 and info["speculative_algorithm"] == "EAGLE3"
    assert info["max_running_requests"] == 64 and info["served_model_name"] == "sim-model"
    assert info["max_total_num_tokens"] > 0
    assert set(info["startup_time"]) >= {"load_weight", "kv_cache_allocation", "cuda_graph"}
    state = info["internal_states"][0]
    assert 1.0 < state["avg_spec_accept_length"] <= 4.0
    assert "last_gen_throughput" in state
    assert json.loads(get(sim.url + "/get_server_info")[1])["version"] == "0.5.23"


def test_generate_streams_cumulative_text_with_meta_info(sim: RunningSimulator) -> None:
    status, raw = post(sim.url + "/generate", {"text": "Hello world", "stream": True,
                                               "sampling_params": {"max_new_tokens": 30,
                                                                   "temperature": 0,
                                                                   "ignore_eos": True}})
    out = events(raw)
    assert status == 200 and out[-1] == "[DONE]"
    data = out[:-1]
    counts = [e["meta_info"]["completion_tokens"] for e in data]
    assert counts[0] == 1 and counts[-1] == 30 and counts == sorted(counts) \
           and len(set(counts)) == len(counts)
    for a, b in itertools.pairwise(data):
        assert b["text"].startswith(a["text"])  # cumulative
    last = data[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 30}
    assert last["prompt_tokens"] == 3 and len(data[-1]["output_ids"]) == 30
    assert last["spec_verify_ct"] == len(data) - 1
    assert last["spec_accept_length"] == 30 / last["spec_verify_ct"]
    assert "e2e_latency" in last


def test_generate_whole_and_input_ids(sim: RunningSimulator) -> None:
    status, body = post(sim.url + "/generate", {"input_ids": [1, 2, 3, 4, 5],
                                                "sampling_params": {"max_new_tokens": 6,
                                                                    "ignore_eos": True}})
    out = json.loads(body)
    assert status == 200 and out["meta_info"]["prompt_tokens"] == 5 \
           and out["meta_info"]["completion_tokens"] == 6
    assert len(out["text"].split()) == 6


def test_chat_stream_with_spec_details_and_usage(sim: RunningSimulator) -> None:
    status, raw = post(sim.url + "/v1/chat/completions", {
        "model": "sim-model", "messages": [{"role": "user", "content": "Why is the sky blue?"}],
        "stream": True, "max_completion_tokens": 20, "ignore_eos": True, "temperature": 0,
        "return_spec_tokens_details": True, "stream_options": {"include_usage": True}})
    out = events(raw)
    assert status == 200 and out[-1] == "[DONE]"
    usage = out[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 20
    details = out[-3]["sglext"]["spec_tokens_details"]
    content_chunks = [e for e in out[1:-3] if e["choices"]]
    # the first token came from the prefill
    assert details["spec_verify_ct"] == len(content_chunks) - 1
    assert details["spec_num_proposed_drafts"] == details["spec_verify_ct"] * 3
    assert sum(details["spec_correct_drafts_histogram"]) == details["spec_verify_ct"]
    assert out[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(e["object"] == "chat.completion.chunk" for e in out[:-1])


def test_completions_whole_response(sim: RunningSimulator) -> None:
    status, body = post(sim.url + "/v1/completions", {"prompt": "Count to ten:", "max_tokens": 9,
                                                      "ignore_eos": True,
                                                      "return_spec_tokens_details": True})
    out = json.loads(body)
    assert status == 200 and out["object"] == "text_completion" and out["id"].startswith("cmpl-")
    assert out["usage"]["completion_tokens"] == 9 \
           and out["usage"]["total_tokens"] == 9 + out["usage"]["prompt_tokens"]
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["sglext"]["spec_tokens_details"]["spec_verify_ct"] >= 1


def test_eos_rule_stops_without_ignore_eos(sim: RunningSimulator) -> None:
    status, body = post(sim.url + "/v1/completions",
                        {"prompt": "Write an essay.", "max_tokens": 5000})
    out = json.loads(body)
    assert status == 200 and out["choices"][0]["finish_reason"] == "stop"
    assert 0 < out["usage"]["completion_tokens"] < 5000


def test_bad_requests_get_sglang_errors(sim: RunningSimulator) -> None:
    status, body = post(sim.url + "/v1/chat/completions", b"{not json")
    err = json.loads(body)
    assert status == 400 and err["object"] == "error" and err["type"] == "BadRequestError" \
           and err["code"] == 400
    status, body = post(sim.url + "/v1/completions", {"prompt": "x", "max_tokens": 10_000_000})
    assert status == 400 and "maximum context length" in json.loads(body)["message"]
    status, body = post(sim.url + "/v1/chat/completions",
                        {"messages": [{"role": "user", "content": "x"}],
                         "temperature": -1})
    assert status == 400 and "temperature must be non-negative" in json.loads(body)["message"]
    status, body = post(sim.url + "/v1/chat/completions", {"model": "sim-model"})
    assert status == 400 and "messages" in json.loads(body)["message"]
    status, body = post(sim.url + "/generate", {"sampling_params": {}})
    assert status == 400 and "text, input_ids" in json.loads(body)["error"]["message"]


def test_flush_cache_only_when_idle(sim: RunningSimulator) -> None:
    status, body = post(sim.url + "/flush_cache", b"")
    assert status == 200 and body.startswith(b"Cache flushed")
    done = threading.Event()

    def long_request() -> None:
        post(sim.url + "/generate", {"text": "long", "sampling_params": {"max_new_tokens": 20000,
                                                                         "ignore_eos": True}})
        done.set()

    worker = threading.Thread(target=long_request)
    worker.start()
    time.sleep(0.2)
    assert not done.is_set()
    assert post(sim.url + "/flush_cache", b"")[0] == 400
    worker.join(30)
    assert get(sim.url + "/flush_cache")[0] == 200


def test_metrics_counters_and_gauges(sim: RunningSimulator) -> None:
    before = get(sim.url + "/metrics")[1].decode()
    post(sim.url + "/generate",
         {"text": "count me", "sampling_params": {"max_new_tokens": 50, "ignore_eos": True}})
    after = get(sim.url + "/metrics")[1].decode()
    assert "# TYPE sglang:generation_tokens_total counter" in after
    assert metric(after, "generation_tokens_total") \
           - metric(before, "generation_tokens_total") == 50
    verify = metric(after, "spec_verify_calls_total") - metric(before, "spec_verify_calls_total")
    assert 50 / 4 <= verify < 50
    assert metric(after, "prompt_tokens_total") > metric(before, "prompt_tokens_total")
    assert metric(after, "num_running_reqs") == 0 and metric(after, "num_queue_reqs") == 0


def test_before_ready_health_is_503_but_models_answer(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Time scale 1: the seed's weight loading alone takes most of a minute.
    with running_simulator([*SPEC, "--enable-metrics"], time_scale=1.0, log_path=tmp_path / "log",
                           wait_ready=False) as server:
        deadline = time.monotonic() + 20
        while http_status(server.url + "/v1/models") != 200:
            assert time.monotonic() < deadline and server.process.poll() is None
            time.sleep(0.02)
        for path in ("/health", "/health_generate", "/ready"):
            assert http_status(server.url + path) == 503, path
        status, _body = post(server.url + "/v1/chat/completions",
                             {"messages": [{"role": "user", "content": "x"}]})
        assert status == 503
        stopped = time.monotonic()
        server.process.terminate()
        assert server.process.wait(5) == 0
        assert time.monotonic() - stopped < 2
    assert "fired up" not in (tmp_path / "log").read_text()


def test_metrics_absent_without_the_flag(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with running_simulator(SPEC, time_scale=400.0, log_path=tmp_path / "log") as server:
        assert http_status(server.url + "/metrics") == 404
        assert http_status(server.url + "/health_generate") == 200
