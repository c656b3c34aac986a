"""The verbs of the command line in one table: each one's name, help, arguments and the function that runs
it. A run function imports what it needs when it runs, so that the command line starts fast; it returns an
``Outcome`` that ``patchspec.cli.main`` prints (lines, or one JSON envelope with ``--json``).
"""
from __future__ import annotations

import argparse
import math
import os
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from patchspec.errors import Exit, PatchspecError, printable, severity_exit

if TYPE_CHECKING:
    from patchspec.install.root import Root
    from patchspec.results import FileAction, Record


@dataclass
class Outcome:
    """What a verb did: its exit code, one record per fact (``results.Record``, printed by ``--json``), and
    the lines a person reads."""

    exit: int
    results: list[Record] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Arg:
    """One argument: ``argparse``'s flags and options; ``locate`` takes a shipped spec's name for its file."""

    flags: tuple[str, ...]
    options: dict = field(default_factory=dict)
    locate: bool = False

    @property
    def dest(self) -> str:
        if "dest" in self.options:
            return self.options["dest"]
        flag = next((f for f in self.flags if f.startswith("--")), self.flags[0])
        return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class OneOf:
    """Arguments of which exactly one is given."""

    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Verb:
    """A verb: ``name`` is one word, or a group and its action (``profile new``); ``json`` adds ``--json``."""

    name: str
    help: str
    run: Callable[[argparse.Namespace], Outcome]
    args: tuple[Arg | OneOf, ...] = ()
    json: bool = True
    description: bool = True   # the help is also the verb's own --help description

    def arguments(self):
        for arg in self.args:
            yield from arg.args if isinstance(arg, OneOf) else (arg,)


def _seconds(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds >= 0")
    return value


SPEC = Arg(("spec",), {"help": "a spec YAML file, or the name of a spec shipped with patchspec"}, locate=True)
APPLIED_SPEC = Arg(("spec",), {"help": "a spec YAML file, or the name of a spec shipped with patchspec"})
RELEASE = Arg(("--release",), {"default": "auto",
                               "help": "a release profile in releases/ beside the spec, or auto (default): the "
                                       "profile whose versions match the packages installed under the root"})
ROOT = Arg(("--root",), {"required": True, "help": "site-packages or source tree to patch"})
ONLY = Arg(("--only",), {"action": "append", "metavar": "PACKAGE",
                         "help": "patch only the targets of this top-level package (repeatable)"})
LOCK = Arg(("--lock-timeout",), {"type": _seconds, "default": 30.0, "metavar": "SECONDS",
                                 "help": "how long to wait for another patchspec writing to the root (default 30)"})
PYTHON = Arg(("--python",), {"help": "the interpreter that runs the root (default: the venv or prefix the root is "
                                    "the site-packages of)"})
TIMEOUT = Arg(("--timeout",), {"type": _seconds, "default": 300.0, "metavar": "SECONDS",
                               "help": "how long the root's interpreter may take to import the patched modules "
                                       "(default 300)"})
NO_CACHE = Arg(("--no-cache",), {"action": "store_true", "help": "do not read or fill the drift cache"})
SPEC_DIR = Arg(("--dir",), {"default": ".", "help": "where to write the spec and its files (default: here)"})
NAME = Arg(("name",), {"help": "the spec's name: lower-case letters, digits and dashes"})


def _only(args) -> set[str] | None:
    return set(args.only) if args.only else None


def cmd_compile(args) -> Outcome:
    from patchspec.cli.present import plan_line, report_lines, written_line
    from patchspec.prepare import compile_spec, prepare
    from patchspec.releases import report
    from patchspec.results import FileAction, FileDone, NoteKind, Row, notes_of

    prepared = prepare(args.spec, args.release, args.root, _only(args))
    texts = compile_spec(prepared)
    out = _notes(notes_of(NoteKind.WARNING, prepared.warnings))
    out.results += [Row(r) for r in prepared.plan.resolved]
    out.lines += [plan_line(r) for r in prepared.plan.resolved]
    if args.output:
        _write_output(args.output, prepared.root, texts)
        for rel in texts:
            out.results.append(FileAction(rel, FileDone.WRITTEN, args.output))
        out.lines.append(written_line(len(texts), args.output))
    drifted = report.drift(args.spec, args.root, prepared.release)
    out.results += drifted.records()
    out.lines += report_lines(drifted)
    return out


def _write_output(output: str, source: Root, texts: dict[str, str]) -> None:
    """``compile -o OUT``: copies of the patched files under OUT, a directory outside the root (patching the
    root is apply's, journaled and with pristine copies). Every path is checked before anything is written
    (``root.inside``: none leaves OUT, none lands in the root), and each file is written new and renamed
    over its place, so no file is written through a link. Each is in its file's own encoding, as apply
    writes it."""
    from patchspec.compiler import encoding
    from patchspec.install.root import inside

    root = source.path
    out = Path(os.path.realpath(output))
    if out == root or root in out.parents:
        raise PatchspecError(f"-o {output} is inside the root ({root}): compile writes copies elsewhere; "
                             "`patchspec apply` patches the root; nothing was written", file=output)
    targets = {}
    for rel in texts:   # the file's directory must stay in OUT; the file itself, a link or not, is replaced
        folder, name = posixpath.split(posixpath.normpath(rel))
        targets[rel] = out / (inside(out, folder, "compiled file", f"-o {output}") if folder else "") / name
    for rel, target in targets.items():
        if root in target.parents:
            raise PatchspecError(f"compiled file {rel!r} would land inside the root ({root}) through -o {output}; "
                                 "nothing was written", file=str(target))
    data = {rel: encoding.encode(text, source.read_bytes(rel)) for rel, text in texts.items()}
    for rel, target in targets.items():
        tmp = target.with_name(target.name + ".patchspec-tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "wb") as handle:
                handle.write(data[rel])
            os.replace(tmp, target)
        except OSError as exc:
            raise PatchspecError(f"cannot write the compiled file: {exc.strerror}", file=str(target)) from None


def _notes(notes) -> Outcome:
    """Recovery of an interrupted run, records dropped after an upgrade, warnings (``results.Note``): before
    a verb's lines."""
    from patchspec.cli.present import note_line

    return Outcome(Exit.OK, list(notes), [note_line(n) for n in notes])


def cmd_apply(args) -> Outcome:
    from patchspec.cli.present import apply_lines
    from patchspec.results import FileAction, FileDone, Row
    from patchspec.verbs import writing

    result = writing.apply(args.spec, args.release, args.root, _only(args), args.lock_timeout,
                       verify=not args.no_verify, python=args.python, timeout=args.timeout)
    out = _notes(result.notes)
    out.results += [Row(r) for r in result.skipped]
    out.results += [FileAction(rel, FileDone.PATCHED if result.changed else FileDone.UNCHANGED) for rel in result.files]
    if result.proof is not None:
        out.results += _proof(result.proof).results
    out.lines += apply_lines(result, args.no_verify)
    return out


def _proof(shown) -> Outcome:
    """The proof's modules and rows, and their lines."""
    from patchspec.cli.present import proof_lines

    return Outcome(Exit.BROKEN if shown.failed else Exit.OK, [*shown.modules, *shown.rows], proof_lines(shown))


def cmd_verify(args) -> Outcome:
    from patchspec.verbs import proving

    return _proof(proving.verify(args.spec, args.root, args.python, args.timeout))


def cmd_unapply(args) -> Outcome:
    from patchspec.verbs import writing

    result = writing.unapply(args.spec, args.root, args.force, args.lock_timeout, args.python)
    return _files(_notes(result.notes), result.actions)


def _files(out: Outcome, actions: list[FileAction]) -> Outcome:
    from patchspec.cli.present import file_line

    out.results += actions
    out.lines += [file_line(done) for done in actions]
    return out


def cmd_recover(args) -> Outcome:
    from patchspec.verbs import writing

    return _notes(writing.recover(args.root, args.lock_timeout))


def cmd_forget(args) -> Outcome:
    from patchspec.verbs import writing

    return _files(Outcome(Exit.OK), writing.forget(args.spec, args.root, args.lock_timeout))


def cmd_status(args) -> Outcome:
    from patchspec.cli.present import status_lines
    from patchspec.verbs import reading

    result = reading.status(args.root)
    return Outcome(result.code, [*result.results], status_lines(result))


def cmd_check(args) -> Outcome:
    from patchspec.cli.present import check_line, note_line
    from patchspec.verbs import reading

    result = reading.check(args.spec, args.release, args.root, _only(args))
    return Outcome(result.code, [*result.rows, *result.problems],
                   [check_line(r) for r in result.rows] + [note_line(p) for p in result.problems])


def cmd_diff(args) -> Outcome:
    from patchspec.cli.present import colorize
    from patchspec.difftext import unified
    from patchspec.prepare import prepare
    from patchspec.results import Diff
    from patchspec.verbs import reading

    prepared = prepare(args.spec, args.release, args.root, _only(args))
    pieces = [(rel, unified(rel, old, new)) for rel, old, new in reading.diff_texts(prepared)
              if old is not None or not args.patched_only]
    text = "".join(piece for _, piece in pieces)
    if not args.json:
        color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        sys.stdout.write(colorize(text) if color else text)
    return Outcome(Exit.OK, [Diff(rel, piece) for rel, piece in pieces if piece])


def cmd_validate(args) -> Outcome:
    from patchspec import snippets
    from patchspec.cli.present import valid_line
    from patchspec.results import SpecSummary
    from patchspec.spec import load_spec

    spec = load_spec(args.spec)
    snippets.validate(spec)
    summary = SpecSummary(spec.name, len(spec.targets), sum(len(t.transforms) for t in spec.targets))
    release = None
    if args.root:
        from patchspec.prepare import compile_spec, prepare
        from patchspec.verbs import reading

        prepared = prepare(args.spec, args.release, args.root)
        compile_spec(prepared)   # refuses as compile, check and apply do
        reading.check_snippet_imports(prepared, args.python)
        release = prepared.release
    return Outcome(Exit.OK, [summary], [valid_line(summary, args.root, release)])


def cmd_drift(args) -> Outcome:
    from patchspec.cli.present import report_lines
    from patchspec.releases import cache, report

    if args.pypi:
        result = report.pypi_drift(args.spec, cache.requirement(args.pypi), args.release, args.baseline,
                                         not args.no_cache)
    else:
        result = report.drift(args.spec, args.root, args.release, args.baseline, not args.no_cache)
    return Outcome(severity_exit(result.code), result.records(), report_lines(result))


def cmd_matrix(args) -> Outcome:
    from patchspec.cli.present import matrix_markdown, matrix_text
    from patchspec.releases import cache
    from patchspec.releases.matrix import matrix

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
    m = matrix(args.spec, roots, args.release, not args.no_cache)
    lines = matrix_markdown(m) if args.markdown else matrix_text(m)
    return Outcome(severity_exit(m.code), m.records(), lines)


def cmd_profile(args) -> Outcome:
    from patchspec.cli.present import profile_lines
    from patchspec.releases.new_profile import new_profile
    from patchspec.results import FileAction, FileDone, NoteKind, notes_of

    accept = (lambda suggestion: True) if args.accept_suggested else _ask if sys.stdin.isatty() else None
    draft = new_profile(args.release, args.root, args.spec, args.old, args.force, accept,
                                     args.allow_broken)
    notes = notes_of(NoteKind.NEEDS_HUMAN, draft.needs) + notes_of(NoteKind.NOTE, draft.notes)
    lines = profile_lines(draft, notes)
    if draft.text is None:
        return Outcome(Exit.BROKEN, [*notes], lines)
    return Outcome(Exit.BROKEN if draft.needs else Exit.OK, [*notes, FileAction(str(draft.path), FileDone.WRITTEN)],
                   lines)


def _ask(suggestion: str) -> bool:
    print(printable(suggestion))
    return input("take this override into the draft? [y/N] ").strip().lower() in ("y", "yes")


def cmd_init(args) -> Outcome:
    from patchspec import init
    from patchspec.cli.present import init_lines
    from patchspec.releases.cache import pypi_root
    from patchspec.results import FileAction, FileDone, NoteKind, notes_of

    root = args.root or str(pypi_root(args.pypi))
    written, warned = init.scaffold(args.name, root, args.target, args.dir)
    warnings = notes_of(NoteKind.WARNING, warned)
    return Outcome(Exit.OK, [*(FileAction(str(p), FileDone.WRITTEN) for p in written), *warnings],
                   init_lines(written, warnings))


def cmd_record(args) -> Outcome:
    from patchspec import record
    from patchspec.cli.present import record_lines
    from patchspec.releases.new_profile import new_profile
    from patchspec.results import FileAction, FileDone
    from patchspec.verbs import writing

    done = record.record(args.name, args.root, args.upstream, args.before, tuple(args.target), args.dir,
                         apply_edit=lambda spec, root: writing.apply(spec, "auto", root).files,
                         new_profile=lambda release, root, spec: new_profile(release, root, [spec]).path)
    results: list[Record] = [FileAction(str(p), FileDone.WRITTEN) for p in done.written]
    results += [FileAction(rel, FileDone.EDIT_APPLIED) for rel in done.applied]
    return Outcome(Exit.OK, results, record_lines(done, args.root))


def cmd_demo(args) -> Outcome:
    from patchspec import demo

    return Outcome(demo.run(args.pypi, args.spec or str(demo.DEFAULT_SPEC), args.main))


VERBS = (
    Verb("compile", "resolve every anchor, print the plan and the drift report; writes nothing to the root",
         cmd_compile, (SPEC, RELEASE, ROOT, ONLY,
                       Arg(("-o", "--output"), {"help": "write the patched files under this directory"}))),
    Verb("apply", "patch the root in place, all files or none; then prove every transform live in the root's "
                  "interpreter (undone when one is not)", cmd_apply,
         (SPEC, RELEASE, ROOT, ONLY, LOCK, PYTHON, TIMEOUT,
          Arg(("--no-verify",), {"action": "store_true", "help": "skip the run-time proof (status says unverified)"}))),
    Verb("unapply", "restore every file the spec patched, byte for byte", cmd_unapply,
         (APPLIED_SPEC, ROOT, LOCK,
          Arg(("--python",), {"help": "the interpreter that runs the root, to recompile its byte code (default: "
                                      "the root's venv or prefix)"}),
          Arg(("--force",), {"action": "store_true", "help": "restore even files edited since apply"}))),
    Verb("status", "per applied spec: its release, and whether each file is as written, edited by hand or replaced "
                   "by another version of its package, with what to do; writes nothing", cmd_status, (ROOT,)),
    Verb("recover", "roll back an apply or unapply that was interrupted (apply and unapply do it first)",
         cmd_recover, (ROOT, LOCK)),
    Verb("forget", "drop a spec's record without touching the files it patched (a root repaired by hand)",
         cmd_forget, (APPLIED_SPEC, ROOT, LOCK)),
    Verb("check", "one line per transform: 0 applied, 1 would apply cleanly, 4 does not hold", cmd_check,
         (SPEC, RELEASE, ROOT, ONLY)),
    Verb("diff", "the change as a unified diff that patch -p1 and git apply accept", cmd_diff,
         (SPEC, RELEASE, ROOT, ONLY,
          Arg(("--color",), {"choices": ("auto", "always", "never"), "default": "auto",
                             "help": "colour the diff (auto: when printing to a terminal)"}),
          Arg(("--patched-only",), {"action": "store_true", "help": "leave out the snippet files that apply "
                                                                    "installs (the diff is then not complete)"}))),
    Verb("verify", "prove every transform of an applied spec live: import each patched module in the root's "
                   "interpreter and show the transform on the object its live name leads to; 0 all live, 4 one is "
                   "not; writes nothing", cmd_verify, (APPLIED_SPEC, ROOT, PYTHON, TIMEOUT)),
    Verb("validate", "check the spec against the schema and its snippet package; with --root, also that it holds "
                     "there (the verdict compile, check and apply give)", cmd_validate,
         (SPEC, RELEASE,
          Arg(("--root",), {"help": "a root to check the spec on: every target, anchor and name its code reads"}),
          Arg(("--python",), {"help": "with --root: the interpreter that runs it, which must find every module the "
                                      "snippet package imports (default: the root's venv or prefix)"}))),
    Verb("drift", "the drift class of every target and transform: 0 none, 1 still applies, 4 broken; writes nothing",
         cmd_drift,
         (SPEC, RELEASE,
          OneOf((Arg(("--root",), {"help": "site-packages or source tree to check"}),
                 Arg(("--pypi",), {"metavar": "NAME[==VERSION]", "help": "check that release from PyPI (cached); "
                                                                        "a bare NAME: its newest release"}))),
          Arg(("--baseline",), {"help": "a root of the profiled release, or pypi (its pinned wheels): report "
                                        "changed statement ranges and where each anchor moved"}),
          NO_CACHE)),
    Verb("matrix", "drift class of every target and transform on several roots, one column each", cmd_matrix,
         (SPEC, RELEASE,
          Arg(("--root",), {"action": "append", "default": [], "help": "a root: one column (repeatable)"}),
          Arg(("--pypi",), {"action": "append", "default": [], "metavar": "NAME[==VERSION]",
                            "help": "a release from PyPI (cached): one column (repeatable); a bare NAME: its newest "
                                    "release, or with --since every release since"}),
          Arg(("--since",), {"metavar": "VERSION",
                             "help": "with a bare --pypi NAME: one column per release from VERSION on"}),
          Arg(("--markdown",), {"action": "store_true", "help": "print a Markdown table"}),
          NO_CACHE)),
    Verb("profile new", "draft releases/RELEASE.yaml beside the spec when every anchor resolves; else list what "
                        "needs a human", cmd_profile,
         (Arg(("release",), {"help": "the name of the new profile, e.g. v0.31.0"}),
          Arg(("--root",), {"required": True, "help": "a root holding the new release"}),
          Arg(("--spec",), {"action": "extend", "nargs": "+", "required": True,
                            "help": "the specs the profile covers"}, locate=True),
          Arg(("--from",), {"dest": "old", "help": "the profile whose overrides to carry over"}),
          Arg(("--force",), {"action": "store_true", "help": "replace an existing profile"}),
          Arg(("--allow-broken",), {"action": "store_true",
                                    "help": "write the profile even where a transform does not hold (a release the "
                                            "fix cannot take): each is named in a comment and keeps no "
                                            "fingerprint, so check and apply refuse it by name; exits 4"}),
          Arg(("--accept-suggested",), {"action": "store_true",
                                        "help": "take every suggested override (a target renamed, every anchor "
                                                "holding in one candidate) into the draft; on a terminal each is "
                                                "asked otherwise"})),
         description=False),
    Verb("init", "start a spec: a spec that wraps the functions named, its snippet package with a test, and the "
                 "first release profile, drafted from a root", cmd_init,
         (NAME,
          OneOf((Arg(("--root",), {"help": "site-packages or source tree holding the package to patch"}),
                 Arg(("--pypi",), {"metavar": "NAME==VERSION",
                                   "help": "draft from that release on PyPI (cached)"}))),
          Arg(("--target",), {"action": "append", "required": True, "metavar": "FILE:FUNCTION",
                              "help": "a function to patch, e.g. requests/sessions.py:Session.send (repeatable)"}),
          SPEC_DIR)),
    Verb("record", "draft a spec that says a change statement by statement: a hand edit of the installed files "
                   "(replaced by the spec applied), or upstream's change between two releases", cmd_record,
         (NAME,
          Arg(("--root",), {"required": True, "help": "site-packages or source tree holding the package"}),
          Arg(("--from",), {"dest": "upstream", "metavar": "DIST==AFTER",
                            "help": "record what upstream changed in the --target definitions up to release AFTER"}),
          Arg(("--before",), {"metavar": "VERSION",
                              "help": "with --from: the release to compare with (default: the installed one)"}),
          Arg(("--target",), {"action": "append", "default": [], "metavar": "FILE:QUALNAME",
                              "help": "a function, method, class attribute or module-level name (repeatable; "
                                      "needed with --from)"}),
          SPEC_DIR)),
    Verb("demo", "show a spec at work on a release fetched from PyPI, then undo it byte for byte", cmd_demo,
         (Arg(("--pypi",), {"default": "vllm==0.30.0", "metavar": "NAME==VERSION",
                            "help": "the wheel to fetch and patch a copy of (default vllm==0.30.0)"}),
          Arg(("--spec",), {"default": None, "help": "default: the shipped pipeline-parallel spec"}, locate=True)),
         json=False),
)
GROUPS = {"profile": "release profiles"}   # a verb group's help (``profile new``)
