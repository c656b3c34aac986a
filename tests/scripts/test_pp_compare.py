"""scripts/pp-compare.py, the operator's check of a deployment (docs/serving.md): how it reads vLLM's
prompt logprobs, and that an unreachable endpoint is one line and exit code 2."""
from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pp-compare.py"
spec = importlib.util.spec_from_file_location("pp_compare", SCRIPT)
pp_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pp_compare)

# ``choices[0].prompt_logprobs`` as vLLM's completions endpoint returns it with prompt_logprobs=1 (JSON keys
# are strings): nothing for the first token, then the prompt's own token and the top-1 when they differ.
TOKENS = [11, 42, 7, 99]
LOGPROBS = [None,
            {"42": {"logprob": -0.5, "rank": 1, "decoded_token": "a"}},
            {"7": {"logprob": -2.0, "rank": 3, "decoded_token": "b"},
             "5": {"logprob": -0.1, "rank": 1, "decoded_token": "c"}},
            {"99": {"logprob": -1.5, "rank": 1, "decoded_token": "d"}}]


def test_top1_is_the_token_ranked_first_at_each_position():
    assert pp_compare.top1(LOGPROBS) == [42, 5, 99]


def test_nll_sums_the_prompt_tokens_own_logprobs():
    assert pp_compare.nll(TOKENS, LOGPROBS) == (pytest.approx(4.0), 3)


def test_unreachable_endpoint_is_one_line_and_exit_code_2(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    url = f"http://127.0.0.1:{port}"
    assert pp_compare.main([url, url, "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"pp-compare: {url}: ")
