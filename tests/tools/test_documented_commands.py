"""Every ``python tools/<tool>.py ...`` command in README and in the tools' own docstrings parses
with that tool's arguments, so a renamed or removed option cannot leave a documented command
behind (tests/test_readme.py checks that the files README names exist). Only the parse is checked
(nothing is trained or read); commands with placeholders (``<...>``, ``...``, ``$(...)``) or an
option synopsis (``[--x]``) are left out."""
import argparse
import ast
import functools
import re
import shlex

import pytest

from tests.tools.tool_loader import ROOT, load_tool

COMMAND = re.compile(r"(?:^|\s)python (tools/(\w+)\.py)((?:\s.*)?)$")
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|\$\(|\[--")
END = re.compile(r"\s(?:#|&&|;|\||2?>)")  # a comment, a chained command or a redirection ends it


def _bash_lines(text: str) -> list[str]:
    """The lines of a shell text, a backslash-newline joining two lines as bash joins them."""
    return text.replace("\\\n", "").splitlines()


def _commands() -> list[tuple[str, str, str]]:
    """``(where, tool, arguments)`` of each documented command."""
    readme = (ROOT / "README.md").read_text()
    lines = [("README", line) for block in re.findall(r"```bash\n(.*?)```", readme, re.S)
             for line in _bash_lines(block)]
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)
    lines += [("README", " ".join(span.split())) for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose)]
    for path in sorted((ROOT / "tools").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        lines += [(path.name, line) for line in _bash_lines(doc)]
    found = []
    for where, line in lines:
        match = COMMAND.search(line)
        if match is None:
            continue
        arguments = END.split(match.group(3))[0].strip().removesuffix("&").strip()
        if not PLACEHOLDER.search(arguments):
            found.append((where, match.group(2), arguments))
    return found


COMMANDS = _commands()
_tool = functools.cache(load_tool)  # each tool's module loaded once, not once per command


class _Parsed(Exception):
    """Raised by the patched ``parse_args`` once the command line has parsed."""


def test_the_documented_commands_are_found():
    tools = {tool for _, tool, _ in COMMANDS}
    assert len(COMMANDS) > 100 and {"train", "sweep", "report", "benchmark", "tune", "finetune"} <= tools


@pytest.mark.parametrize("where, tool, arguments", COMMANDS,
                         ids=[f"{where}-{tool}-{i}" for i, (where, tool, _) in enumerate(COMMANDS)])
def test_documented_command_parses(where, tool, arguments, monkeypatch, capsys):
    parse = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        parse(self, args, namespace)
        raise _Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse_then_stop)
    with pytest.raises(_Parsed):
        try:
            _tool(tool).main(shlex.split(arguments))
        except SystemExit:
            pytest.fail(f"{where}: `python tools/{tool}.py {arguments}` does not parse: {capsys.readouterr().err}")

