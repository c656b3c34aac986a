"""vllm-gaudi's HPU runner's state update on CPU: its ``InputBatch`` and its ``HPUModelRunner._update_states``
(as patched, in a root first on ``sys.path``), for tests/hpu/gaudi_batches_run.py and bench/host_cost.py.

The method is compiled from the runner's source alone (the rest of the runner module needs a Gaudi) onto a
host object holding what it reads; ``habana_frameworks.torch`` is a stand-in with lazy mode off.
"""
from __future__ import annotations

import ast
import sys
import types
from pathlib import Path
from typing import cast

habana = types.ModuleType("habana_frameworks")
habana.torch = types.ModuleType("habana_frameworks.torch")
habana.torch.core = types.SimpleNamespace(mark_step=lambda: None)
habana.torch.utils = types.SimpleNamespace(internal=types.SimpleNamespace(is_lazy=lambda: False))
sys.modules.update({"habana_frameworks": habana, "habana_frameworks.torch": habana.torch})

import torch  # noqa: E402
import vllm.utils.torch_utils  # noqa: E402

# no platform plugin here: vLLM takes pinned host memory for granted, which needs an accelerator
vllm.utils.torch_utils.PIN_MEMORY = False
import vllm_gaudi.v1.worker.hpu_input_batch as hpu_input_batch  # noqa: E402
from _patchspec_runtime import pipeline_parallel as _pp  # noqa: E402
from vllm.logger import init_logger  # noqa: E402
from vllm.sampling_params import SamplingType  # noqa: E402
from vllm.v1.sample.logits_processor import build_logitsprocs  # noqa: E402

InputBatch = hpu_input_batch.InputBatch


def update_states(is_last_rank: bool):
    """``HPUModelRunner._update_states`` as patched, with the names of its module it reads."""
    path = Path(hpu_input_batch.__file__).with_name("hpu_model_runner.py")
    tree = ast.parse(path.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "HPUModelRunner")
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "_update_states")
    names = {"_pp": _pp, "torch": torch, "cast": cast, "SamplingType": SamplingType,
             "CachedRequestState": hpu_input_batch.CachedRequestState, "logger": init_logger("hpu_model_runner"),
             "get_pp_group": lambda: types.SimpleNamespace(is_last_rank=is_last_rank)}
    exec(compile(ast.Module(body=[method], type_ignores=[]), str(path), "exec"), names)
    return names["_update_states"]


class Runner:
    """What ``_update_states`` reads of an HPU runner, for a model without multimodal or GDN layers."""

    def __init__(self, pp: int, rank: int, max_seqs: int, max_len: int, speculative_config=None,
                 batched: int = 1024, block: int = 16):
        self._update_states = types.MethodType(update_states(rank == pp - 1), self)
        self.parallel_config = types.SimpleNamespace(pipeline_parallel_size=pp)
        self.scheduler_config = types.SimpleNamespace(async_scheduling=False, max_num_seqs=max_seqs)
        self.speculative_config = speculative_config
        self.vllm_config = types.SimpleNamespace(parallel_config=self.parallel_config,
                                                 scheduler_config=self.scheduler_config,
                                                 speculative_config=speculative_config,
                                                 model_config=types.SimpleNamespace(logits_processors=None))
        self.device, self.pin_memory, self.is_pooling_model = torch.device("cpu"), False, False
        self.requests, self.encoder_cache, self.uses_mrope, self.use_async_scheduling = {}, {}, False, False
        self._compact_gdn_group_ids, self._gdn_req_to_base_slot, self._gdn_slot_free_list = [], {}, []
        self.input_batch = InputBatch(
            max_num_reqs=max_seqs, max_model_len=max_len, max_num_batched_tokens=batched, device=self.device,
            pin_memory=False, vocab_size=1000, block_sizes=[block], kernel_block_sizes=[block],
            logitsprocs=build_logitsprocs(self.vllm_config, self.device, False, False, None))
