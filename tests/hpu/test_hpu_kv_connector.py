"""A KV connector with pipeline parallelism, through vLLM's real ``KVOutputAggregator`` (0.26.0, 0.30.0).

With a connector, vLLM's executor aggregates every worker's output and asserts that none is None, and a
request's KV counts as saved only once every worker has reported it. The patched fixture runner's
non-last stage (real processes over gloo, a real ``ExampleConnector``) must return what upstream's
non-last ranks return, carry its connector's finished sets and clear the connector metadata.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURE, SPEC, build_root
from patchspec.verbs import writing

HERE = Path(__file__).resolve().parent
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
          "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
          "num_hidden_layers": 4, "vocab_size": 1000, "max_position_embeddings": 512,
          "torch_dtype": "float32", "rms_norm_eps": 1e-6}
RUN_TIMEOUT_S = 600
RELEASES = ["0.26.0", "0.30.0"]


@pytest.fixture(scope="module", params=RELEASES)
def steps(request, vllm_release, tmp_path_factory):
    version = request.param
    base = tmp_path_factory.mktemp(f"kv-{version}")
    root = build_root(base / "root", vllm_release(version), FIXTURE)
    writing.apply(str(SPEC), f"v{version}", str(root))
    (base / "model").mkdir()
    (base / "model" / "config.json").write_text(json.dumps(CONFIG))
    (base / "storage").mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(HERE)]), "HF_HUB_OFFLINE": "1",
           "VLLM_LOGGING_LEVEL": "ERROR"}
    proc = subprocess.run([sys.executable, str(HERE / "kv_connector_run.py"), str(root), str(base / "model"),
                           str(base / "storage")], env=env, cwd=str(base), capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["steps"]


def test_non_last_stage_returns_a_model_runner_output_without_samples(steps):
    for step in steps:
        assert step["stage_output"] == "ModelRunnerOutput" and step["stage_sampled"] == []
    assert [s["last_sampled"] for s in steps] == [["a", "b"], ["a"]]  # the last stage still samples


def test_non_last_stage_carries_its_connectors_finished_sets(steps):
    assert [s["stage_kv"] for s in steps] == [{"sending": None, "recving": None},  # nothing finished: empty
                                              {"sending": ["b"], "recving": []}]


def test_aggregator_accepts_both_stages_and_finishes_a_request_both_reported(steps):
    assert [s["aggregated"] for s in steps] == [{"sending": [], "recving": []}, {"sending": ["b"], "recving": []}]


def test_non_last_stage_clears_the_connector_metadata(steps):
    assert all(s["metadata_cleared"] for s in steps)
