"""The compiler's own line tracking agrees with libcst's PositionProvider, node for node.

It uses libcst's code generator directly (a private hook), so this test is the guard for libcst upgrades.
"""
from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from patchspec.compiler.context import Definition
from patchspec.compiler.source import SourceFile

CASES = [
    ("vllm/v1/core/sched/scheduler.py", "Scheduler.schedule"),
    ("vllm/model_executor/model_loader/weight_utils.py", "safetensors_weights_iterator"),
    ("vllm/sequence.py", "IntermediateTensors"),
]


@pytest.mark.parametrize("version", ["0.26.0", "0.30.0"])
@pytest.mark.parametrize("rel, qualname", CASES)
def test_lines_match_position_provider(vllm_release, version, rel, qualname):
    source = SourceFile(rel, (vllm_release(version) / rel).read_text())
    definition = Definition(source, source.find(qualname), qualname)
    positions = MetadataWrapper(definition.fragment.module, unsafe_skip_copy=True).resolve(PositionProvider)
    header = 1 if definition.fragment.header else 0
    checked = 0
    for node_type, nodes in definition._nodes.items():
        if issubclass(node_type, cst.BaseStatement | cst.BaseSmallStatement | cst.Call):
            for node in nodes:
                assert definition.line_of(node) == positions[node].start.line - header + definition.fragment.start - 1
                checked += 1
    assert checked > 5
