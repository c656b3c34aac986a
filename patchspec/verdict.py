"""The one verdict of validate, compile, check, apply and profile new on a spec resolved on a root: the one
place that turns the compiler's findings (an unresolved transform, a conflict, what lint refuses, a binding
that does not hold) into a user error at the spec's line:col."""
from __future__ import annotations

from collections.abc import Callable

from patchspec import snippets
from patchspec.compiler import bindings, snippet_api
from patchspec.compiler.edits import ConflictError, Status
from patchspec.compiler.plan import Plan, emit
from patchspec.errors import Location, PatchspecError
from patchspec.model import Loc, Spec, package_of


def raise_plan_errors(plan: Plan) -> None:
    """The first unresolved transform, at its place in the spec and (where known) in the source."""
    if plan.errors:
        first = plan.errors[0]
        more = f" (and {len(plan.errors) - 1} more)" if len(plan.errors) > 1 else ""
        definition = plan.definitions.get(first.key)
        line = first.lines[0] if first.lines else definition.node.lineno if definition else None
        source = Location(first.file, line)
        # an anchor missing from one of several definitions of the name: say which one was searched
        where = f" ({first.note})" if first.status == Status.MISSING and " is defined " in (first.note or "") else ""
        raise _at_spec(f"{first.spec} {first.target}#{first.index} {first.kind} in {first.function}: "
                       f"{first.detail}{where}{more}; nothing was written", first.spec_loc, source)


def _at_spec(message: str, spec_loc: Loc | None, *source: Location) -> PatchspecError:
    if spec_loc is None:
        first, *rest = source
        return PatchspecError(message, file=first.file, line=first.line, also=tuple(rest))
    return PatchspecError(message, file=spec_loc.file, line=spec_loc.line, col=spec_loc.col, also=source)


def emit_checked(plan: Plan, specs: list[Spec]) -> dict[str, str]:
    """``emit``, with a conflict or anything lint refuses raised at the spec's line:col."""
    try:
        texts = emit(plan, specs)
    except ConflictError as exc:
        first, rest = (exc.spec_locations[0], exc.spec_locations[1:]) if exc.spec_locations else (None, [])
        raise _at_spec(f"{exc.message}; nothing was written", first, *[Location(r.file, r.line, r.col) for r in rest],
                       exc.locations[0]) from None   # a conflict's first location is its source line
    if plan.problems:
        problem = plan.problems[0]
        more = f" (and {len(plan.problems) - 1} more)" if len(plan.problems) > 1 else ""
        raise _at_spec(f"{problem.spec}: {problem.text}{more}; nothing was written", problem.where,
                       Location(problem.file, problem.line))
    return texts


def compile_plan(spec: Spec, plan: Plan, read: Callable[[str], str | None]) -> dict[str, str]:
    """The one verdict of validate, compile, apply and profile new on a spec resolved on a root: the patched
    texts, or the first thing that refuses it (an unresolved transform, a conflict, what lint finds in the
    patched file, a ``USES`` binding the release lacks) raised at the spec's line:col."""
    raise_plan_errors(plan)
    raise_if_upstream(spec, plan)
    texts = emit_checked(plan, [spec])
    raise_binding_problems(binding_problems(spec, plan, read), spec)
    return texts


def raise_if_upstream(spec: Spec, plan: Plan) -> None:
    """A release that already holds every change of the spec: nothing to write, and a rewrite whose
    replacement is there (drift calls it ``obsolete``). Apply and check say it in these words."""
    done = [r for r in plan.resolved if r.ok and not r.edits]
    if done and not plan.files:
        raise PatchspecError(f"nothing to apply: this release already holds every change of {spec.name} "
                             f"({done[0].target}#{done[0].index}: {done[0].note or 'nothing to do'}); "
                             f"the fix is upstream", file=spec.path)


def binding_problems(spec: Spec, plan: Plan, read: Callable[[str], str | None]) -> list[str]:
    """What anchors cannot show: a member or signature the snippets use (their ``USES``) that the release
    lacks, or what lint found in the inserted code (a name not bound before it...): emit first."""
    present = {package_of(r.file) for r in plan.resolved if r.status != Status.SKIPPED}
    uses = {rel: entries for rel, entries in snippets.read_package(snippet_api.declared_uses, spec).items()
            if package_of(rel) in present}
    parsed = bindings.tree_reader(read)
    found = bindings.problems(uses, lambda rel: plan.sources[rel].tree if rel in plan.sources else parsed(rel),
                              bindings.spec_binds(spec))
    return found + [str(p) for p in plan.problems]


def raise_binding_problems(problems: list[str], spec: Spec) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise PatchspecError(f"binding: {problems[0]}{more}; nothing was written", file=spec.path)
