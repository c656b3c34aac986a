"""Adding a verb is one row of the verb table and its run function: a throwaway verb added to the table is
in ``--help``, runs, prints a JSON envelope the output schema takes, and the verb outputs test counts it
as not run until its session runs it."""
from __future__ import annotations

import json

import jsonschema
import pytest

from patchspec import cli
from patchspec.cli import main, output_schema
from patchspec.cli.verbs import ROOT, VERBS, Outcome, Verb
from patchspec.errors import Exit
from patchspec.results import Note, NoteKind
from tests.cli.test_verb_outputs import verbs_not_run


def cmd_hello(args) -> Outcome:
    return Outcome(Exit.OK, [Note(NoteKind.NOTE, f"hello {args.root}")], [f"hello {args.root}"])


@pytest.fixture
def hello(monkeypatch):
    verb = Verb("hello", "greet a root (a throwaway verb)", cmd_hello, (ROOT,))
    monkeypatch.setattr(cli, "VERBS", (*VERBS, verb))
    return verb


def test_a_verb_from_one_row_is_in_help_and_runs_with_lines_and_json(hello, capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "hello" in capsys.readouterr().out
    assert main(["hello", "--root", "here"]) == 0
    assert capsys.readouterr().out == "hello here\n"
    assert main(["hello", "--root", "here", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, output_schema.schema())
    assert doc["verb"] == "hello" and doc["results"] == [{"type": "note", "detail": "hello here"}]


def test_the_verb_outputs_test_counts_a_new_verb_as_not_run(hello):
    every = [v.name.split() for v in VERBS]
    assert verbs_not_run(every, cli.VERBS) == ["hello"]
    assert verbs_not_run([*every, ["hello", "--root", "r"]], cli.VERBS) == []
