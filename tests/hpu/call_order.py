"""The calls a runner method makes for one batch shape, read from its source (``ast``), in order.

``unroll`` walks ``HPUModelRunner.sample_tokens`` statement by statement and keeps the calls named in
``names``: a branch whose condition is listed in ``conditions`` is taken or not; any other branch must
make the same calls whichever way it goes (else the method has drifted in a way this cannot judge); a
loop over ``zip(*shallow_tuple(X))`` runs ``loops[X]`` times, and any other loop must make no such call.
A call of ``_pp.non_last_stage_output`` (the patched early return) is kept as ``NON_LAST_RETURN``.
"""
from __future__ import annotations

import ast

NON_LAST_RETURN = "NON_LAST_RETURN"
PREPARE = ("_ensure_decodes_first", "ensure_multi_token_decodes_last", "_get_prompts_and_decodes",
           "_prepare_inputs", "maybe_setup_kv_connector")
FORWARD = ("_get_model_mm_inputs", "_configure_lora", "_execute_model_generic")
CLOSE = ("maybe_wait_for_kv_save", "get_finished_kv_transfers")
SAMPLE = ("_run_sampling", "compute_logits", "apply_grammar_bitmask", "rejection_sampler", "sampler",
          "_get_prompt_logprobs_dict", "propose_draft_token_ids", "warmup_sampler")
NAMES = PREPARE + FORWARD + CLOSE


class DriftError(AssertionError):
    pass


def method(source: str, cls: str, name: str) -> ast.FunctionDef:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    raise DriftError(f"{cls}.{name} not found")


def batch_conditions(num_prompts: int, num_decodes: int, dp_padding: bool, warmup: bool = False) -> dict:
    """The conditions of ``sample_tokens`` that the batch shape decides, as the source spells them."""
    return {
        "num_prefills > 0": num_prompts > 0,
        "num_pad_prefill_batch_across_dp > 0": dp_padding,
        "num_decodes > 0": num_decodes > 0,
        "dummy_decode_input_data_across_dp is not None": dp_padding and num_decodes == 0,
        "not warmup_mode": not warmup,
        "not self.vllm_config.speculative_config": True,
        "self.speculative_config": False,
        "self.use_structured_output": False,
        "self.use_async_scheduling": False,
        "self.use_async_scheduling or self.use_structured_output": False,
    }


def unroll(func: ast.FunctionDef, conditions: dict, loops: dict, names=NAMES) -> list[str]:
    return _block(func.body, conditions, loops, set(names))


def _block(stmts, conditions, loops, names) -> list[str]:
    out: list[str] = []
    for stmt in stmts:
        out += _stmt(stmt, conditions, loops, names)
    return out


def _stmt(stmt, conditions, loops, names) -> list[str]:
    if isinstance(stmt, ast.If):
        test = ast.unparse(stmt.test)
        header = _calls(stmt.test, names)
        if test in conditions:
            return header + _block(stmt.body if conditions[test] else stmt.orelse, conditions, loops, names)
        taken, skipped = (_block(b, conditions, loops, names) for b in (stmt.body, stmt.orelse))
        if taken != skipped:
            raise DriftError(f"line {stmt.lineno}: branch on {test!r} decides between {taken} and {skipped}")
        return header + taken
    if isinstance(stmt, ast.For):
        body = _block(stmt.body, conditions, loops, names)
        source = _shallow_tuple_arg(stmt.iter)
        if source in loops:
            return _calls(stmt.iter, names) + body * loops[source]
        if body:
            raise DriftError(f"line {stmt.lineno}: loop over {ast.unparse(stmt.iter)!r} makes calls {body}")
        return _calls(stmt.iter, names)
    if isinstance(stmt, ast.While) and _block(stmt.body, conditions, loops, names):
        raise DriftError(f"line {stmt.lineno}: while loop makes tracked calls")
    if isinstance(stmt, ast.With):
        return [c for item in stmt.items for c in _calls(item.context_expr, names)] + \
            _block(stmt.body, conditions, loops, names)
    if isinstance(stmt, ast.Try):
        return _block(stmt.body, conditions, loops, names) + _block(stmt.finalbody, conditions, loops, names)
    return _calls(stmt, names)


def _shallow_tuple_arg(node) -> str | None:
    """``X`` of ``enumerate(zip(*shallow_tuple(X)))`` or ``zip(*shallow_tuple(X))``."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "shallow_tuple":
            return ast.unparse(call.args[0])
    return None


def _calls(node, names) -> list[str]:
    """Tracked calls in evaluation order (arguments before the call that takes them)."""
    found: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_Call(self, call: ast.Call) -> None:
            self.generic_visit(call)
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
            if name == "non_last_stage_output":
                found.append(NON_LAST_RETURN)
            elif name in names:
                found.append(name)

    Visitor().visit(node)
    return found


def calls_before_return(patched: ast.FunctionDef, names=SAMPLE) -> list[str]:
    """Calls among ``names`` anywhere before the non-last early return: a non-last stage would make them."""
    found: list[str] = []
    for stmt in patched.body:
        calls = _calls(stmt, set(names))
        if NON_LAST_RETURN in calls:
            return found + calls[:calls.index(NON_LAST_RETURN)]
        found += calls
    raise DriftError("no non-last early return in the method")


def non_last_stage_calls(patched: ast.FunctionDef, conditions: dict, loops: dict) -> list[str]:
    """What a non-last stage must run: the method up to the early return, then the forwards and the
    closing of the step as the method itself runs them, and nothing that samples."""
    calls = unroll(patched, conditions, loops)
    if calls.count(NON_LAST_RETURN) != 1:
        raise DriftError(f"the non-last early return appears {calls.count(NON_LAST_RETURN)} times")
    cut = calls.index(NON_LAST_RETURN)
    return calls[:cut] + [c for c in calls[cut + 1:] if c in FORWARD + CLOSE]
