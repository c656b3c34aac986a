"""The ``patchspec`` command line. Every verb prints one line per fact; ``--json`` prints one envelope.

Exit codes (one table for every verb, see ``patchspec.errors``): 0 ok or applied, 1 would apply or drift
that still applies, 2 user error, 3 internal error, 4 the spec does not hold on the root, 64 usage error,
130 interrupted, 141 stdout closed by its reader. An error is one line, ``patchspec: file:line:col: what is wrong``; ``--debug`` adds the
traceback of an internal error.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from patchspec import ops
from patchspec.errors import Exit, PatchspecError, severity_exit


@dataclass
class Outcome:
    """What a verb did: its exit code, one JSON record per fact, and the lines a person reads."""

    exit: int
    results: list[dict] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code instead of 2 (a user error of patchspec's)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


def _spec_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="a spec YAML file, or the name of a spec shipped with patchspec")


def _release_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--release", default="auto",
                        help="a release profile in releases/ beside the spec, or auto (default): the profile "
                             "whose versions match the packages installed under the root")


def _root_args(parser: argparse.ArgumentParser, only: bool = True) -> None:
    parser.add_argument("--root", required=True, help="site-packages or source tree to patch")
    if only:
        parser.add_argument("--only", action="append", metavar="PACKAGE",
                            help="patch only the targets of this top-level package (repeatable)")


def _python_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", help="the interpreter that runs the root (default: the venv or prefix the "
                                         "root is the site-packages of)")
    parser.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                        help="how long the root's interpreter may take to import the patched modules "
                             "(default 300)")


def _lock_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lock-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                        help="how long to wait for another patchspec writing to the root (default 30)")


def build_parser() -> argparse.ArgumentParser:
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    common = argparse.ArgumentParser(add_help=False, parents=[debug])
    common.add_argument("--json", action="store_true", help="print one JSON envelope instead of lines")
    parser = _Parser(prog="patchspec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"patchspec {_version()}")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    def verb(name: str, help: str, parents=(common,)) -> argparse.ArgumentParser:
        return verbs.add_parser(name, help=help, description=help, parents=list(parents))

    p = verb("compile", "resolve every anchor, print the plan and the drift report; writes nothing to the root")
    _spec_arg(p), _release_arg(p), _root_args(p)
    p.add_argument("-o", "--output", help="write the patched files under this directory")
    p = verb("apply", "patch the root in place, all files or none; then prove every transform live in the "
                      "root's interpreter (undone when one is not)")
    _spec_arg(p), _release_arg(p), _root_args(p), _lock_arg(p), _python_args(p)
    p.add_argument("--no-verify", action="store_true", help="skip the run-time proof (status says unverified)")
    p = verb("unapply", "restore every file the spec patched, byte for byte")
    _spec_arg(p), _root_args(p, only=False), _lock_arg(p)
    p.add_argument("--python", help="the interpreter that runs the root, to recompile its byte code "
                                    "(default: the root's venv or prefix)")
    p.add_argument("--force", action="store_true", help="restore even files edited since apply")
    p = verb("status", "per applied spec: its release, and whether each file is as written, edited by hand "
                       "or replaced by another version of its package, with what to do; writes nothing")
    _root_args(p, only=False)
    p = verb("recover", "roll back an apply or unapply that was interrupted (apply and unapply do it first)")
    _root_args(p, only=False), _lock_arg(p)
    p = verb("forget", "drop a spec's record without touching the files it patched (a root repaired by hand)")
    _spec_arg(p), _root_args(p, only=False), _lock_arg(p)
    p = verb("check", "one line per transform: 0 applied, 1 would apply cleanly, 4 does not hold")
    _spec_arg(p), _release_arg(p), _root_args(p)
    p = verb("diff", "the change as a unified diff that patch -p1 and git apply accept")
    _spec_arg(p), _release_arg(p), _root_args(p)
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="colour the diff (auto: when printing to a terminal)")
    p.add_argument("--patched-only", action="store_true",
                   help="leave out the snippet files that apply installs (the diff is then not complete)")
    p = verb("verify", "prove every transform of an applied spec live: import each patched module in the "
                       "root's interpreter and show the transform on the object its live name leads to; "
                       "0 all live, 4 one is not; writes nothing")
    _spec_arg(p), _root_args(p, only=False), _python_args(p)
    p = verb("validate", "check the spec against the schema and its snippet package; with --root, also that it "
                         "holds there (the verdict compile, check and apply give)")
    _spec_arg(p), _release_arg(p)
    p.add_argument("--root", help="a root to check the spec on: every target, anchor and name its code reads")
    p.add_argument("--python", help="with --root: the interpreter that runs it, which must find every module "
                                    "the snippet package imports (default: the root's venv or prefix)")
    _add_drift_verbs(verb, verbs, common)
    p = verb("demo", "show a spec at work on a release fetched from PyPI, then undo it byte for byte", (debug,))
    p.add_argument("--pypi", default="vllm==0.30.0", metavar="NAME==VERSION",
                   help="the wheel to fetch and patch a copy of (default vllm==0.30.0)")
    p.add_argument("--spec", default=None, help="default: the shipped pipeline-parallel spec")
    return parser


def _add_drift_verbs(verb, verbs, common) -> None:
    p = verb("drift", "the drift class of every target and transform: 0 none, 1 still applies, 4 broken; "
                      "writes nothing")
    _spec_arg(p), _release_arg(p)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", help="site-packages or source tree to check")
    where.add_argument("--pypi", metavar="NAME[==VERSION]",
                       help="check that release from PyPI (cached); a bare NAME: its newest release")
    p.add_argument("--baseline", help="a root of the profiled release, or pypi (its pinned wheels): report "
                                      "changed statement ranges and where each anchor moved")
    p.add_argument("--no-cache", action="store_true", help="do not read or fill the drift cache")
    p = verb("matrix", "drift class of every target and transform on several roots, one column each")
    _spec_arg(p), _release_arg(p)
    p.add_argument("--root", action="append", default=[], help="a root: one column (repeatable)")
    p.add_argument("--pypi", action="append", default=[], metavar="NAME[==VERSION]",
                   help="a release from PyPI (cached): one column (repeatable); a bare NAME: its newest release, "
                        "or with --since every release since")
    p.add_argument("--since", metavar="VERSION", help="with a bare --pypi NAME: one column per release from VERSION on")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--no-cache", action="store_true", help="do not read or fill the drift cache")
    profile = verbs.add_parser("profile", help="release profiles", description="release profiles")
    actions = profile.add_subparsers(dest="action", required=True, parser_class=_Parser)
    p = actions.add_parser("new", help="draft releases/RELEASE.yaml beside the spec when every anchor resolves; "
                                       "else list what needs a human", parents=[common])
    p.add_argument("release", help="the name of the new profile, e.g. v0.31.0")
    p.add_argument("--root", required=True, help="a root holding the new release")
    p.add_argument("--spec", action="extend", nargs="+", required=True, help="the specs the profile covers")
    p.add_argument("--from", dest="old", help="the profile whose overrides to carry over")
    p.add_argument("--force", action="store_true", help="replace an existing profile")
    p.add_argument("--allow-broken", action="store_true",
                   help="write the profile even where a transform does not hold (a release the fix cannot take): "
                        "each is named in a comment and keeps no fingerprint, so check and apply refuse it by "
                        "name; exits 4")
    p.add_argument("--accept-suggested", action="store_true",
                   help="take every suggested override (a target renamed, every anchor holding in one candidate) "
                        "into the draft; on a terminal each is asked otherwise")
    p = verb("init", "start a spec: a spec that wraps the functions named, its snippet package with a test, and "
                     "the first release profile, drafted from a root")
    p.add_argument("name", help="the spec's name: lower-case letters, digits and dashes")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--root", help="site-packages or source tree holding the package to patch")
    where.add_argument("--pypi", metavar="NAME==VERSION", help="draft from that release on PyPI (cached)")
    p.add_argument("--target", action="append", required=True, metavar="FILE:FUNCTION",
                   help="a function to patch, e.g. requests/sessions.py:Session.send (repeatable)")
    p.add_argument("--dir", default=".", help="where to write the spec and its files (default: here)")
    p = verb("record", "draft a spec that says a change statement by statement: a hand edit of the installed "
                       "files (replaced by the spec applied), or upstream's change between two releases")
    p.add_argument("name", help="the spec's name: lower-case letters, digits and dashes")
    p.add_argument("--root", required=True, help="site-packages or source tree holding the package")
    p.add_argument("--from", dest="upstream", metavar="DIST==AFTER",
                   help="record what upstream changed in the --target definitions up to release AFTER")
    p.add_argument("--before", metavar="VERSION", help="with --from: the release to compare with (default: the "
                                                      "installed one)")
    p.add_argument("--target", action="append", default=[], metavar="FILE:QUALNAME",
                   help="a function, method, class attribute or module-level name (repeatable; needed with --from)")
    p.add_argument("--dir", default=".", help="where to write the spec and its files (default: here)")


def _version() -> str:
    try:
        return metadata.version("patchspec")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_closed()


def _stdout_closed() -> int:
    """The reader of stdout went away (``| head -0``): end quietly with SIGPIPE's status, as ``git`` does,
    and point stdout at /dev/null so that the interpreter's last flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return Exit.PIPE


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        _locate_specs(args)
        outcome = VERBS[args.verb](args)
    except BrokenPipeError:
        raise
    except PatchspecError as exc:
        return _fail(args, exc.exit_code, str(exc), exc.to_json())
    except KeyboardInterrupt:
        return _fail(args, Exit.INTERRUPTED, "interrupted", {"message": "interrupted", "locations": []})
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback on request
        if args.debug:
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc}" + ("" if args.debug else "; --debug shows where")
        return _fail(args, Exit.INTERNAL, message, {"message": message, "locations": []})
    if getattr(args, "json", False):
        print(json.dumps(envelope(args.verb, outcome.exit, outcome.results, None), indent=1))
    else:
        for line in outcome.lines:
            print(line)
    sys.stdout.flush()
    return outcome.exit


def _locate_specs(args) -> None:
    from patchspec.spec import locate

    if args.verb in ("unapply", "forget", "verify"):  # take an applied spec's name too
        return
    if isinstance(getattr(args, "spec", None), str):
        args.spec = locate(args.spec)
    elif isinstance(getattr(args, "spec", None), list):
        args.spec = [locate(s) for s in args.spec]


def envelope(verb: str, code: int, results: list[dict], error: dict | None) -> dict:
    """The one JSON document every verb prints (schema: ``patchspec/schema/output.schema.json``)."""
    return {"verb": verb, "exit": int(code), "results": results, "error": error}


def _fail(args, code: int, message: str, error: dict) -> int:
    if getattr(args, "json", False):
        print(json.dumps(envelope(args.verb, code, [], error), indent=1))
    print(f"patchspec: {message}", file=sys.stderr)
    return code


def _only(args) -> set[str] | None:
    return set(args.only) if args.only else None


def _row(r) -> dict:
    return {"type": "transform", "spec": r.spec, "target": r.target, "index": r.index, "kind": r.kind,
            "file": r.file, "function": r.function, "status": r.status, "line": r.line, "detail": r.detail}


def cmd_compile(args) -> Outcome:
    from patchspec.releases import drift_report

    prepared = ops.prepare(args.spec, args.release, args.root, _only(args))
    texts = ops.compile_spec(prepared)
    out = _notes([f"warning: {w}" for w in prepared.warnings])
    out.results += [_row(r) for r in prepared.plan.resolved]
    out.lines += [ops.plan_line(r) for r in prepared.plan.resolved]
    if args.output:
        for rel, text in texts.items():
            _write_output(Path(args.output), rel, text)
            out.results.append({"type": "file", "path": rel, "action": "written", "under": args.output})
        out.lines.append(f"wrote {len(texts)} file(s) under {args.output}")
    drifted = drift_report.drift(args.spec, args.root, prepared.release)
    out.results += drift_report.report_json(drifted)
    out.lines += drift_report.report_lines(drifted)
    return out


def _write_output(out: Path, rel: str, text: str) -> None:
    try:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PatchspecError(f"cannot write the compiled file: {exc.strerror}", file=str(out / rel)) from None


def _notes(notes: list[str]) -> Outcome:
    """Recovery of an interrupted run, records dropped after an upgrade, warnings: before a verb's lines."""
    kinds = {"recovered": "recovery", "dropped": "replaced", "warning": "warning"}
    return Outcome(Exit.OK, [{"type": kinds.get(n.split(":", 1)[0], "note"), "detail": n} for n in notes],
                   list(notes))


def cmd_apply(args) -> Outcome:
    result = ops.apply(args.spec, args.release, args.root, _only(args), args.lock_timeout,
                       verify=not args.no_verify, python=args.python, timeout=args.timeout)
    out = _notes(result.notes)
    for r in result.skipped:
        out.results.append({**_row(r), "status": "skipped"})
        out.lines.append(f"skipped: {r.target}#{r.index} {r.kind} ({r.detail})")
    action = "patched" if result.changed else "unchanged"
    for rel in result.files:
        out.results.append({"type": "file", "path": rel, "action": action})
        out.lines.append(f"{'patched' if result.changed else 'already applied, unchanged'}: {rel}")
    if result.proof is not None:
        shown = _proof(result.proof)
        out.results += shown.results
        out.lines += [line for line in shown.lines[:-1] if not line.startswith("live: ")]
        out.lines.append(f"verified: {shown.lines[-1]}")
    elif result.changed:
        out.lines.append("unverified: " + ("--no-verify" if args.no_verify else "no interpreter is known to run "
                                          "the root; `patchspec verify SPEC --root R --python P` proves it"))
    return out


def _proof(shown) -> Outcome:
    """The proof's rows, its modules, and a last line counting them."""
    from patchspec import proof

    out = Outcome(Exit.BROKEN if shown.failed else Exit.OK)
    out.results += [{"type": "module", **m} for m in shown.modules]
    out.results += [_row(r) for r in shown.rows]
    out.lines += [f"{m['status']}: {m['module']} ({m['detail']})" for m in shown.modules
                  if m["status"] != "imported"]
    out.lines += [f"{r.status}: {r.spec} {r.target}#{r.index} {r.kind} {r.function} in {r.file} ({r.detail})"
                  for r in shown.rows]
    count = {s: sum(r.status == s for r in shown.rows) for s in (proof.LIVE, proof.STATIC, proof.NOT_LIVE)}
    out.lines.append(f"{count[proof.LIVE]} live, {count[proof.STATIC]} shown statically, "
                     f"{count[proof.NOT_LIVE]} not live, in {shown.interpreter}")
    return out


def cmd_verify(args) -> Outcome:
    return _proof(ops.verify(args.spec, args.root, args.python, args.timeout))


def cmd_unapply(args) -> Outcome:
    result = ops.unapply(args.spec, args.root, args.force, args.lock_timeout, args.python)
    return _files(_notes(result.notes), result.actions)


def _files(out: Outcome, actions: list[tuple[str, str]]) -> Outcome:
    for rel, action in actions:
        out.results.append({"type": "file", "path": rel, "action": action})
        out.lines.append(f"{action}: {rel}")
    return out


def cmd_recover(args) -> Outcome:
    return _notes(ops.recover(args.root, args.lock_timeout))


def cmd_forget(args) -> Outcome:
    return _files(Outcome(Exit.OK), ops.forget(args.spec, args.root, args.lock_timeout))


def cmd_status(args) -> Outcome:
    result = ops.status(args.root)
    return Outcome(result.code, result.results, result.lines)


def cmd_check(args) -> Outcome:
    result = ops.check(args.spec, args.release, args.root, _only(args))
    return Outcome(result.code, [_row(r) for r in result.rows] + [dict(p) for p in result.problems],
                   [ops.check_line(r) for r in result.rows] + [p["detail"] for p in result.problems])


def cmd_diff(args) -> Outcome:
    from patchspec.difftext import unified

    prepared = ops.prepare(args.spec, args.release, args.root, _only(args))
    pieces = [(rel, unified(rel, old, new)) for rel, old, new in ops.diff_texts(prepared)
              if old is not None or not args.patched_only]
    text = "".join(piece for _, piece in pieces)
    if not args.json:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        sys.stdout.write(_colorize(text) if color else text)
    return Outcome(Exit.OK, [{"type": "diff", "path": rel, "diff": piece} for rel, piece in pieces if piece])


def _colorize(text: str) -> str:
    codes = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
    out = []
    for line in text.splitlines(keepends=True):
        code = codes.get(line[:1]) if not line.startswith(("+++", "---")) else "\033[1m"
        out.append(f"{code}{line.rstrip(chr(10))}\033[0m\n" if code else line)
    return "".join(out)


def cmd_validate(args) -> Outcome:
    from patchspec import snippets
    from patchspec.spec import load_spec

    spec = load_spec(args.spec)
    snippets.validate(spec)
    count = sum(len(t.transforms) for t in spec.targets)
    where = ""
    if args.root:
        prepared = ops.prepare(args.spec, args.release, args.root)
        ops.compile_spec(prepared)   # refuses as compile, check and apply do
        ops.check_snippet_imports(spec, args.root, args.python)
        where = f"; holds on {args.root} (release {prepared.release})"
    return Outcome(Exit.OK, [{"type": "spec", "spec": spec.name, "targets": len(spec.targets),
                              "transforms": count}],
                   [f"valid: {spec.name}: {len(spec.targets)} targets, {count} transforms{where}"])


def cmd_drift(args) -> Outcome:
    from patchspec.releases import cache, drift_report

    if args.pypi:
        result = drift_report.pypi_drift(args.spec, cache.requirement(args.pypi), args.release, args.baseline,
                                         not args.no_cache)
    else:
        result = drift_report.drift(args.spec, args.root, args.release, args.baseline, not args.no_cache)
    return Outcome(severity_exit(result.code), drift_report.report_json(result), drift_report.report_lines(result))


def cmd_matrix(args) -> Outcome:
    from patchspec.releases import cache, drift_report

    if args.since and not any("==" not in given for given in args.pypi):
        raise PatchspecError("--since needs a --pypi NAME without a version")
    requirements = []
    for given in args.pypi:
        if "==" in given or not args.since:
            requirements.append(cache.requirement(given))
        else:
            requirements += [f"{given}=={v}" for v in cache.releases_of(given, args.since)]
    roots = args.root + [str(cache.pypi_root(r)) for r in requirements]
    if not roots:
        raise PatchspecError("matrix needs at least one --root or --pypi")
    m = drift_report.matrix(args.spec, roots, args.release, not args.no_cache)
    lines = drift_report.matrix_markdown(m) if args.markdown else drift_report.matrix_text(m)
    return Outcome(severity_exit(m.code), drift_report.matrix_json(m), lines)


def cmd_profile(args) -> Outcome:
    from patchspec.releases import drift_report

    accept = (lambda suggestion: True) if args.accept_suggested else _ask if sys.stdin.isatty() else None
    draft = drift_report.new_profile(args.release, args.root, args.spec, args.old, args.force, accept,
                                     args.allow_broken)
    results = [{"type": "needs-human", "detail": n} for n in draft.needs]
    results += [{"type": "note", "detail": n} for n in draft.notes]
    lines = [f"needs a human: {n}" for n in draft.needs] + draft.notes
    if draft.text is None:
        return Outcome(Exit.BROKEN, results, lines + [f"nothing written: {draft.path}"])
    results.append({"type": "file", "path": str(draft.path), "action": "written"})
    broken = f" (with {len(draft.needs)} transform(s) that do not hold)" if draft.needs else ""
    return Outcome(Exit.BROKEN if draft.needs else Exit.OK, results, lines + [f"wrote {draft.path}{broken}"])


def _ask(suggestion: str) -> bool:
    print(suggestion)
    return input("take this override into the draft? [y/N] ").strip().lower() in ("y", "yes")


def cmd_init(args) -> Outcome:
    from patchspec import init
    from patchspec.releases.cache import pypi_root

    root = args.root or str(pypi_root(args.pypi))
    written = init.scaffold(args.name, root, args.target, args.dir)
    spec = written[0]
    return Outcome(Exit.OK, [{"type": "file", "path": str(p), "action": "written"} for p in written],
                   [f"wrote {p}" for p in written] + [
                       f"next: edit {written[1]}, then: patchspec apply {spec} --root SITE-PACKAGES"])


def cmd_record(args) -> Outcome:
    from patchspec import ops, record
    from patchspec.releases import drift_report

    done = record.record(args.name, args.root, args.upstream, args.before, tuple(args.target), args.dir,
                         apply_edit=lambda spec, root: ops.apply(spec, "auto", root).files,
                         new_profile=lambda release, root, spec: drift_report.new_profile(release, root, [spec]).path)
    results = [{"type": "file", "path": str(p), "action": "written"} for p in done.written]
    results += [{"type": "file", "path": rel, "action": "replaced by the spec applied"} for rel in done.applied]
    lines = [f"wrote {p}" for p in done.written]
    lines += [f"{t.file}:{t.qualname}: {len(t.steps)} transform{'s' if len(t.steps) != 1 else ''} "
              f"({', '.join(s.kind for s in t.steps)})" for t in done.targets if t.steps]
    spec = done.written[0]
    if done.applied:
        lines += [f"applied: {rel} is now the pristine release with {spec.stem} applied (unapply gives back "
                  "the release; your edit's own bytes are kept in the .edit directory)" for rel in done.applied]
    else:
        lines.append(f"next: patchspec apply {spec} --root {args.root}")
    return Outcome(Exit.OK, results, lines + done.notes)


def cmd_demo(args) -> Outcome:
    from patchspec import demo

    return Outcome(demo.run(args.pypi, args.spec or str(demo.DEFAULT_SPEC), main))


VERBS = {"compile": cmd_compile, "apply": cmd_apply, "unapply": cmd_unapply, "check": cmd_check,
         "status": cmd_status, "recover": cmd_recover, "forget": cmd_forget, "diff": cmd_diff,
         "validate": cmd_validate, "verify": cmd_verify, "drift": cmd_drift, "matrix": cmd_matrix,
         "profile": cmd_profile, "init": cmd_init, "record": cmd_record, "demo": cmd_demo}


if __name__ == "__main__":
    sys.exit(main())
