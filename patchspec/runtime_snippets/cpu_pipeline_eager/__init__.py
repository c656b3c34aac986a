"""vLLM's CPU runner at pipeline size > 1 in eager mode: the buffer that later stages
receive into.

The runner allocates ``intermediate_tensors`` only in its warm-up dummy run, and eager
mode (``CompilationMode.NONE``) skips warm-up, so a non-first stage's first real step
fails ``assert self.intermediate_tensors is not None``. Hooks import vLLM lazily (they
are imported while vLLM's own modules are), and are inert on the first stage, so at
pipeline size 1.
"""


def allocate_intermediate_tensors(runner) -> None:
    """After the model loads: allocate the receive buffer the dummy run would have,
    unless it exists."""
    from vllm.distributed.parallel_state import get_pp_group

    if get_pp_group().is_first_rank or runner.intermediate_tensors is not None:
        return
    runner.intermediate_tensors = runner.model.make_empty_intermediate_tensors(
        batch_size=runner.max_num_tokens,
        dtype=runner.model_config.dtype,
        device=runner.device,
    )
