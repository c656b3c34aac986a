"""The ``patchspec`` command line. Every verb prints one line per fact; ``--json`` prints one envelope.

Exit codes (one table for every verb, see ``patchspec.errors``): 0 ok or applied, 1 would apply or drift
that still applies, 2 user error, 3 internal error, 4 the spec does not hold on the root, 64 usage error,
130 interrupted, 141 stdout closed by its reader. An error is one line, ``patchspec: file:line:col: what is
wrong``; ``--debug`` adds the traceback of an internal error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from patchspec.cli.verbs import GROUPS, VERBS, OneOf, Verb
from patchspec.errors import Exit, PatchspecError, printable, run


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on their own exit code instead of 2 (a user error of patchspec's)."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(Exit.USAGE, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``, reading the installed version only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"patchspec {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The parser of every verb in ``VERBS``, in the table's order."""
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    common = _Parser(add_help=False, parents=[debug])
    common.add_argument("--json", action="store_true", help="print one JSON envelope instead of lines")
    parser = _Parser(prog="patchspec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version, help="show program's version number and exit")
    verbs = parser.add_subparsers(dest="verb", required=True, parser_class=_Parser)
    groups: dict[str, argparse._SubParsersAction] = {}
    for verb in VERBS:
        where, name = verbs, verb.name
        if " " in verb.name:
            group, name = verb.name.split(" ", 1)
            if group not in groups:
                groups[group] = verbs.add_parser(group, help=GROUPS[group], description=GROUPS[group]).add_subparsers(
                    dest="action", required=True, parser_class=_Parser)
            where = groups[group]
        p = where.add_parser(name, help=verb.help, parents=[common if verb.json else debug],
                             description=verb.help if verb.description else None)
        p.set_defaults(run=verb)
        for arg in verb.args:
            if isinstance(arg, OneOf):
                one = p.add_mutually_exclusive_group(required=True)
                for choice in arg.args:
                    one.add_argument(*choice.flags, **choice.options)
            else:
                p.add_argument(*arg.flags, **arg.options)
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("patchspec")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    with run():   # the command's context: each warning said once
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
    args.main = main   # the entry point, for a verb that runs other verbs (demo): cli.verbs imports no cli
    try:
        _locate_specs(args.run, args)
        outcome = args.run.run(args)
    except BrokenPipeError:
        raise
    except PatchspecError as exc:
        return _fail(args, exc)
    except KeyboardInterrupt:
        return _fail(args, PatchspecError("interrupted", exit_code=Exit.INTERRUPTED))
    except Exception as exc:  # noqa: BLE001 - a bug: one line, the traceback on request
        if args.debug:
            traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc}" + ("" if args.debug else "; --debug shows where")
        return _fail(args, PatchspecError(message, exit_code=Exit.INTERNAL))
    if getattr(args, "json", False):
        print(json.dumps(envelope(args.verb, outcome.exit, [r.to_json() for r in outcome.results], None), indent=1))
    else:
        for line in outcome.lines:
            print(printable(line))
    sys.stdout.flush()
    return outcome.exit


def _locate_specs(verb: Verb, args) -> None:
    """A shipped spec's name, where the verb's argument takes one, stands for its file."""
    located = [arg.dest for arg in verb.arguments() if arg.locate]
    if not located:
        return
    from patchspec.spec import locate

    for dest in located:
        value = getattr(args, dest)
        if isinstance(value, str):
            setattr(args, dest, locate(value))
        elif isinstance(value, list):
            setattr(args, dest, [locate(v) for v in value])


def envelope(verb: str, code: int, results: list[dict], error: dict | None) -> dict:
    """The one JSON document every verb prints (schema: ``patchspec/schema/output.schema.json``)."""
    return {"verb": verb, "exit": int(code), "results": results, "error": error}


def _fail(args, error: PatchspecError) -> int:
    """An error: its JSON record (``PatchspecError.to_json``) in the envelope with ``--json``, and one line."""
    if getattr(args, "json", False):
        print(json.dumps(envelope(args.verb, error.exit_code, [], error.to_json()), indent=1))
    print(f"patchspec: {printable(str(error))}", file=sys.stderr)
    return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
