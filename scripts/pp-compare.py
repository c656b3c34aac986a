#!/usr/bin/env python3
"""Compare two OpenAI-compatible vLLM endpoints serving one model, e.g. pipeline size 1 and 2.

Greedy answers (temperature 0) must be identical, and teacher-forced prompt logprobs must pick the same
top-1 token at every position: a pipeline stage that received another batch's hidden states, or a
partition that dropped a layer, shows up as a changed token long before it shows up in an answer.

    python3 scripts/pp-compare.py http://node0:8000 http://other:8000 --model NAME \
        [--prompts FILE] [--texts FILE ...] [--max-tokens 64]

``--prompts``: one prompt per line (default: a few built in). ``--texts``: files scored teacher-forced
(default: the prompts). Prints each difference, then ``greedy_match=k/n top1_match=k/n nll_a=.. nll_b=..``;
exits 0 when everything matches, 1 when something differs, 2 when an endpoint fails. Standard library
only, so it runs on any node.
"""
from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "List three prime numbers greater than 100:",
    "Translate to German: The weather is nice today.",
    "In 1969, the first humans to walk on the Moon were",
]


class EndpointError(Exception):
    pass


def complete(base_url: str, body: dict, timeout_s: float = 600.0) -> dict:
    """The first choice of a ``/v1/completions`` request."""
    request = urllib.request.Request(base_url.rstrip("/") + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return json.load(response)["choices"][0]
    except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as e:
        raise EndpointError(f"{base_url}: {e}") from None


def greedy(base_url: str, model: str, prompt: str, max_tokens: int) -> list[int]:
    choice = complete(base_url, {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                                 "return_token_ids": True})
    return choice["token_ids"]


def scored(base_url: str, model: str, text: str) -> tuple[list[int], list]:
    """The prompt's token ids and vLLM's ``prompt_logprobs`` (None first, then one dict per position)."""
    choice = complete(base_url, {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0,
                                 "prompt_logprobs": 1, "return_token_ids": True})
    return choice["prompt_token_ids"], choice["prompt_logprobs"]


def top1(prompt_logprobs: list) -> list[int]:
    """The token ranked first at each scored position (vLLM lists the prompt's token and the top ones)."""
    return [next(int(t) for t, entry in position.items() if entry["rank"] == 1)
            for position in prompt_logprobs if position is not None]


def nll(token_ids: list[int], prompt_logprobs: list) -> tuple[float, int]:
    """Summed negative logprob of the prompt's own tokens, and how many positions were scored."""
    total, count = 0.0, 0
    for token, position in zip(token_ids, prompt_logprobs, strict=True):
        if position is not None:
            total -= position[str(token)]["logprob"] if str(token) in position else position[token]["logprob"]
            count += 1
    return total, count


def compare(a: str, b: str, model: str, prompts: list[str], texts: list[str], max_tokens: int) -> tuple[list, dict]:
    differences, greedy_same, top1_same, positions = [], 0, 0, 0
    sums = {"a": [0.0, 0], "b": [0.0, 0]}
    for i, prompt in enumerate(prompts):
        one, two = greedy(a, model, prompt, max_tokens), greedy(b, model, prompt, max_tokens)
        if one == two:
            greedy_same += 1
        else:
            at = next((k for k, (x, y) in enumerate(zip(one, two, strict=False)) if x != y), min(len(one), len(two)))
            differences.append(f"prompt {i}: greedy answers differ from token {at}")
    for i, text in enumerate(texts):
        (ids_a, lp_a), (ids_b, lp_b) = scored(a, model, text), scored(b, model, text)
        if ids_a != ids_b:
            differences.append(f"text {i}: the endpoints tokenize it differently (not the same model?)")
            continue
        first_a, first_b = top1(lp_a), top1(lp_b)
        same = sum(x == y for x, y in zip(first_a, first_b, strict=True))
        if same != len(first_a):
            differences.append(f"text {i}: top-1 differs at {len(first_a) - same} of {len(first_a)} positions")
        top1_same, positions = top1_same + same, positions + len(first_a)
        for key, logprobs in (("a", lp_a), ("b", lp_b)):
            total, count = nll(ids_a, logprobs)
            sums[key][0] += total
            sums[key][1] += count
    summary = {"greedy_match": f"{greedy_same}/{len(prompts)}", "top1_match": f"{top1_same}/{positions}"}
    for key, (total, count) in sums.items():
        summary[f"nll_{key}"] = f"{total / count:.4f}" if count else "nan"
    return differences, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="base URL of the reference endpoint, e.g. http://node0:8000")
    parser.add_argument("b", help="base URL of the endpoint under test")
    parser.add_argument("--model", required=True, help="the served model name (the same on both)")
    parser.add_argument("--prompts", help="a file with one prompt per line")
    parser.add_argument("--texts", nargs="+", default=[], help="files to score teacher-forced")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    try:
        prompts = PROMPTS if args.prompts is None else [
            line for line in Path(args.prompts).read_text(encoding="utf-8").splitlines() if line.strip()]
        texts = [Path(path).read_text(encoding="utf-8") for path in args.texts] or prompts
    except OSError as e:
        print(f"pp-compare: {e}", file=sys.stderr)
        return 2
    try:
        differences, summary = compare(args.a, args.b, args.model, prompts, texts, args.max_tokens)
    except EndpointError as e:
        print(f"pp-compare: {e}", file=sys.stderr)
        return 2
    for line in differences:
        print(line)
    print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
