"""The run-time proof of an applied spec: ``verify``, and the proof ``apply`` runs as its last step."""
from __future__ import annotations

from patchspec import proof
from patchspec.compiler.plan import resolve
from patchspec.errors import PatchspecError
from patchspec.install import interpreter, txn
from patchspec.install.pristine import pristine_reader
from patchspec.install.root import Root
from patchspec.install.state import State, load_state, writer_active
from patchspec.prepare import applied_specs
from patchspec.spec import spec_name


def prove_applied(root: Root, state: State, name: str, runs: interpreter.Interpreter,
                  timeout: float) -> proof.Proof:
    """The run-time proof of applied spec ``name`` in the root's interpreter, planned from the pristine texts."""
    spec = applied_specs(state, root)[name]
    plan = resolve([spec], pristine_reader(root, state), root.has_package)
    return proof.prove(root, spec, plan, state, runs, timeout)


def verify(spec_name_or_path: str, root_path: str, python: str | None = None,
           timeout: float = interpreter.TIMEOUT) -> proof.Proof:
    """Writes nothing: prove every transform of an applied spec live in the root's interpreter."""
    root = Root.open(root_path)
    if txn.journal_left(root):
        if writer_active(root):
            raise PatchspecError("another patchspec is applying or unapplying on this root (it holds the lock): "
                                 "the files are not as committed; verify when it is done", file=str(root.path))
        raise PatchspecError("an interrupted run left a journal: the files are not as committed; "
                             f"`patchspec recover --root {root.path}` first", file=str(root.path))
    state = load_state(root)
    name = spec_name(spec_name_or_path)
    if name not in state.specs:
        raise PatchspecError(f"spec {name} is not applied to this root: nothing to verify", file=str(root.path))
    runs = root_interpreter(root, python)
    if runs is None:
        raise PatchspecError("no interpreter runs this root (it is no site-packages of a venv or prefix): "
                             "name it with --python", file=str(root.path))
    try:
        return prove_applied(root, state, name, runs, timeout)
    except interpreter.ProbeError as exc:
        raise PatchspecError(f"the run-time proof did not run: {exc}", file=str(root.path)) from None


def root_interpreter(root: Root, python: str | None) -> interpreter.Interpreter | None:
    """The interpreter that runs ``root``: ``--python``, else the one a ``--python`` named at apply (the
    state record keeps it), else the one the root's path names."""
    return interpreter.find(root.path, python, None if python else load_state(root).python())
