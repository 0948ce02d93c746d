"""Refusals SGLang makes after its argument checks (tuner/sglang/loading.py) and the values SGLang
forces that the issue-23 comparison with the real 0.5.23 found missing from the rules: judged before
anything is deployed."""

from __future__ import annotations

from tuner.sglang import rules
from tuner.sglang.hardware import Hardware
from tuner.sglang.parse import parse_server_args

H100 = Hardware("LlamaForCausalLM", (9, 0))


def args(*argv: str) -> dict[str, object]:
    return parse_server_args(["--model-path", "m", *argv], exit_on_error=False)


EAGLE3 = ("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
          "--speculative-num-steps", "3",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")


def test_a_backend_the_draft_table_lacks_is_refused_as_loading_the_draft_model_would() -> None:
    verdict = rules.judge(args(*EAGLE3, "--attention-backend", "torch_native"), H100)
    assert verdict.violation is not None
    assert verdict.violation.message == "ValueError: EAGLE is not supported in decode attention " \
                                        "backend torch_native"
    # One step builds no multi-step draft backend: then the draft extend backend is the one that
    # refuses.
    one_step = [a if a != "3" else "1" for a in EAGLE3]
    one_step[one_step.index("--speculative-num-draft-tokens") + 1] = "2"
    verdict = rules.judge(args(*one_step, "--attention-backend", "torch_native"), H100)
    assert verdict.violation is not None and verdict.violation.message == (
        "ValueError: EAGLE is not supported in attention backend torch_native")
    # The draft's own backend wins over the server's; a backend in the table is accepted.
    assert rules.judge(args(*EAGLE3, "--attention-backend", "torch_native",
                            "--speculative-draft-attention-backend", "triton"),
                       H100).violation is None
    assert rules.judge(args(*EAGLE3, "--attention-backend", "triton"), H100).violation is None
    # Not an EAGLE-family draft: no table.
    assert rules.judge(args("--attention-backend", "torch_native"), H100).violation is None


def test_standalone_with_attention_dp_is_refused() -> None:
    standalone = [("STANDALONE" if a == "EAGLE3" else a) for a in EAGLE3]
    verdict = rules.judge(args(*standalone, "--enable-dp-attention", "--dp-size", "2", "--tp-size",
                               "2"), H100)
    assert verdict.violation is not None \
           and "standalone speculative decoding does not support dp attention" in (
        verdict.violation.message)


def test_intel_xpu_forces_128_token_pages() -> None:
    verdict = rules.judge(args("--attention-backend", "intel_xpu"), H100)
    assert verdict.effective is not None and verdict.effective["page_size"] == 128
    verdict = rules.judge(args("--attention-backend", "intel_xpu", "--page-size", "64"), H100)
    assert verdict.effective is not None and verdict.effective["page_size"] == 64


def test_where_the_targets_own_sglang_is_asked_its_table_judges_instead() -> None:
    """``tune`` turns the loading rules off once the target's SGLang answers: the refusal is then
    SGLang's own (from its own release's table, labelled "refused by SGLang"), not a copy of
    0.5.23's."""
    torch_native = args(*EAGLE3, "--attention-backend", "torch_native")
    assert rules.judge(torch_native, H100).violation is not None
    off = rules.judge(torch_native, H100, loading=False)
    assert off.violation is None and off.effective is not None \
           and off.effective["attention_backend"] == "torch_native"
