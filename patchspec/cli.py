"""The ``patchspec`` command line. Every verb prints one line per fact; ``--json`` prints one document.

Exit codes: 0 success (check: applied), 1 check/drift: not applied but applies cleanly, or drift that still
applies, 2 any error (bad input, drift that breaks the spec); the error is one line ``file:line:col: what``.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from patchspec import ops
from patchspec.errors import PatchspecError


def _add_common(parser: argparse.ArgumentParser, release: bool = True, root: bool = True) -> None:
    parser.add_argument("spec", help="the spec YAML file")
    if release:
        parser.add_argument("--release", default="auto",
                            help="a profile in specs/releases/, or auto (read the versions under the root)")
    if root:
        parser.add_argument("--root", required=True, help="site-packages or source tree to patch")
        parser.add_argument("--only", action="append", metavar="PACKAGE",
                            help="patch only the targets of this top-level package (repeatable)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchspec", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("compile", help="resolve every anchor and print the plan; writes nothing to the root")
    _add_common(p)
    p.add_argument("-o", "--output", help="write the patched files under this directory")
    p = verbs.add_parser("apply", help="patch the root in place, all files or none")
    _add_common(p)
    p.add_argument("--lock-timeout", type=float, default=30.0)
    p = verbs.add_parser("unapply", help="restore every file byte for byte")
    _add_common(p, release=False)
    p.add_argument("--force", action="store_true", help="restore even files edited since apply")
    p.add_argument("--lock-timeout", type=float, default=30.0)
    p = verbs.add_parser("check", help="0 applied, 1 would apply cleanly, 2 drifted")
    _add_common(p)
    p = verbs.add_parser("diff", help="the change as a unified diff that patch -p1 and git apply accept")
    _add_common(p)
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    p.add_argument("--patched-only", action="store_true",
                   help="leave out the snippet files that apply installs (the diff is then not complete)")
    p = verbs.add_parser("validate", help="check the spec against the schema and its snippet package")
    _add_common(p, release=False, root=False)
    _add_drift_verbs(verbs)
    _add_demo_verb(verbs)
    return parser


def _add_drift_verbs(verbs) -> None:
    p = verbs.add_parser("drift", help="0 no drift, 1 drift that still applies, 2 broken; writes nothing")
    _add_common(p, root=False)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", help="site-packages or source tree to check")
    where.add_argument("--pypi", metavar="NAME==VERSION", help="check that wheel from PyPI (cached)")
    p.add_argument("--baseline", help="a root of the profiled release, or pypi (its pinned wheels): report "
                                      "changed statement ranges and where each anchor moved")
    p.add_argument("--no-cache", action="store_true", help="do not read or fill the drift cache")
    p = verbs.add_parser("matrix", help="drift class of every target and transform on several roots")
    _add_common(p, root=False)
    p.add_argument("--root", action="append", default=[], help="a root: one column (repeatable)")
    p.add_argument("--pypi", action="append", default=[], metavar="NAME==VERSION",
                   help="a wheel from PyPI (cached): one column (repeatable)")
    p.add_argument("--markdown", action="store_true", help="a Markdown table")
    actions = verbs.add_parser("profile", help="release profiles").add_subparsers(dest="action", required=True)
    p = actions.add_parser(
        "new", help="draft specs/releases/RELEASE.yaml when every anchor resolves; else list what needs a human")
    p.add_argument("release")
    p.add_argument("--root", required=True, help="a root holding the new release")
    p.add_argument("--spec", action="extend", nargs="+", required=True, help="the specs the profile covers")
    p.add_argument("--from", dest="old", help="the profile whose overrides to carry over")
    p.add_argument("--force", action="store_true", help="replace an existing profile")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _add_demo_verb(verbs) -> None:
    p = verbs.add_parser("demo", help="show the spec at work on a vLLM release fetched from PyPI")
    p.add_argument("--pypi", default="vllm==0.30.0", metavar="NAME==VERSION")
    p.add_argument("--spec", default=None, help="default: specs/pipeline-parallel.yaml of this checkout")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return VERBS[args.verb](args)
    except PatchspecError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc)}))
        print(f"patchspec: {exc}", file=sys.stderr)
        return exc.exit_code


def _only(args) -> set[str] | None:
    return set(args.only) if args.only else None


def _emit(args, document: dict, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(document, indent=1))
    else:
        for line in lines:
            print(line)


def _rows(plan) -> list[dict]:
    return [{"spec": r.spec, "target": r.target, "index": r.index, "kind": r.kind, "file": r.file,
             "function": r.function, "status": r.status, "line": r.line, "detail": r.detail, "lines": r.lines}
            for r in plan.resolved]


def cmd_compile(args) -> int:
    prepared = ops.prepare(args.spec, args.release, args.root, _only(args))
    lines = [ops.plan_line(r) for r in prepared.plan.resolved]
    texts = ops.compile_spec(prepared)
    if args.output:
        out = Path(args.output)
        for rel, text in texts.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_text(text, encoding="utf-8")
        lines.append(f"wrote {len(texts)} file(s) under {out}")
    from patchspec import drift_report

    drifted = drift_report.drift(args.spec, args.root, prepared.release)
    lines += drift_report.report_lines(drifted)
    _emit(args, {"release": prepared.release, "plan": _rows(prepared.plan), "files": sorted(texts),
                 "drift": drift_report.report_json(drifted)}, lines)
    return 0


def cmd_apply(args) -> int:
    result = ops.apply(args.spec, args.release, args.root, _only(args), args.lock_timeout)
    lines = [f"skipped: {r.target}#{r.index} {r.kind} ({r.detail})" for r in result.skipped]
    verb = "patched" if result.changed else "already applied, unchanged"
    lines += [f"{verb}: {rel}" for rel in result.files]
    _emit(args, {"changed": result.changed, "files": result.files,
                 "skipped": [f"{r.target}#{r.index}" for r in result.skipped]}, lines)
    return 0


def cmd_unapply(args) -> int:
    files = ops.unapply(args.spec, args.root, args.force, args.lock_timeout)
    _emit(args, {"restored": files}, [f"restored: {rel}" for rel in files])
    return 0


def cmd_check(args) -> int:
    result = ops.check(args.spec, args.release, args.root, _only(args))
    _emit(args, {"code": result.code, "lines": result.lines}, result.lines)
    return result.code


def cmd_diff(args) -> int:
    from patchspec.difftext import unified

    prepared = ops.prepare(args.spec, args.release, args.root, _only(args))
    text = "".join(unified(rel, old, new) for rel, old, new in ops.diff_texts(prepared)
                   if old is not None or not args.patched_only)
    if args.json:
        print(json.dumps({"diff": text}))
        return 0
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
    sys.stdout.write(_colorize(text) if color else text)
    return 0


def _colorize(text: str) -> str:
    codes = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    out = []
    for line in text.splitlines(keepends=True):
        code = codes.get(line[:1]) if not line.startswith(("+++", "---")) else "\033[1m"
        out.append(f"{code}{line.rstrip(chr(10))}\033[0m\n" if code else line)
    return "".join(out)


def cmd_validate(args) -> int:
    from patchspec import snippets
    from patchspec.spec import load_spec

    spec = load_spec(args.spec)
    snippets.validate(spec)
    count = sum(len(t.transforms) for t in spec.targets)
    _emit(args, {"spec": spec.name, "targets": len(spec.targets), "transforms": count},
          [f"valid: {spec.name}: {len(spec.targets)} targets, {count} transforms"])
    return 0


def cmd_drift(args) -> int:
    from patchspec import drift_report

    if args.pypi:
        result = drift_report.pypi_drift(args.spec, args.pypi, args.release, args.baseline, not args.no_cache)
    else:
        result = drift_report.drift(args.spec, args.root, args.release, args.baseline, not args.no_cache)
    _emit(args, drift_report.report_json(result), drift_report.report_lines(result))
    return result.code


def cmd_matrix(args) -> int:
    from patchspec import drift_report

    from patchspec.cache import pypi_root

    roots = args.root + [str(pypi_root(requirement)) for requirement in args.pypi]
    if not roots:
        raise PatchspecError("matrix needs at least one --root or --pypi")
    m = drift_report.matrix(args.spec, roots, args.release)
    lines = drift_report.matrix_markdown(m) if args.markdown else drift_report.matrix_text(m)
    _emit(args, drift_report.matrix_json(m), lines)
    return m.code


def cmd_profile(args) -> int:
    from patchspec import drift_report

    draft = drift_report.new_profile(args.release, args.root, args.spec, args.old, args.force)
    if draft.text is None:
        lines = [f"needs a human: {n}" for n in draft.needs] + draft.notes + [f"nothing written: {draft.path}"]
    else:
        lines = draft.notes + [f"wrote {draft.path}"]
    _emit(args, {"path": str(draft.path), "written": draft.text is not None, "needs": draft.needs,
                 "notes": draft.notes}, lines)
    return 0 if draft.text is not None else 2


def cmd_demo(args) -> int:
    from patchspec import demo

    return demo.run(args.pypi, args.spec or str(demo.DEFAULT_SPEC), main)


VERBS = {"compile": cmd_compile, "apply": cmd_apply, "unapply": cmd_unapply, "check": cmd_check,
         "diff": cmd_diff, "validate": cmd_validate, "drift": cmd_drift, "matrix": cmd_matrix,
         "profile": cmd_profile, "demo": cmd_demo}


if __name__ == "__main__":
    sys.exit(main())
