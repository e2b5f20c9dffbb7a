"""README's commands and prose name files that exist, its code blocks are closed where they should be,
and its Python examples (```pycon blocks) run and print what they show."""
import doctest
import glob
import re
from pathlib import Path

import pytest

from tests.doctest_runner import assert_examples_pass

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# DGL's launcher, which README cites from the DGL repository; the cards' folder in an installed wheel
NOT_IN_CHECKOUT = {"tools/launch.py", "zoo/datasets/"}


def _expand(path: str) -> list[str]:
    """Shell brace expansion: ``a_{b,c}.yaml`` -> ``a_b.yaml``, ``a_c.yaml``."""
    match = re.search(r"\{([^{}]*)\}", path)
    if match is None:
        return [path]
    return [full for choice in match.group(1).split(",")
            for full in _expand(path[:match.start()] + choice + path[match.end():])]


def _unwrap(ref: str) -> str:
    """``ref`` less the sentence or Markdown link around it (a trailing ``.``, ``,`` or unmatched ``]``)."""
    ref = ref.rstrip(".,")
    return ref[:-1] if ref.endswith("]") and "[" not in ref else ref


def test_every_recipe_tool_and_card_named_exists():
    # a path of this repository: not inside another one (dgl/tools/..., tests/tools/...), no <placeholder>
    found = re.findall(r"(?<![\w/.<>-])(?:recipes|tools|datasets|zoo|tests)/[\w.{},*\[\]/-]+", README)
    named = {_unwrap(ref) for ref in found} - NOT_IN_CHECKOUT
    assert len(named) > 40  # the pattern still finds README's commands
    missing = sorted(path for ref in named for path in _expand(ref) if not glob.glob(str(ROOT / path)))
    assert not missing, f"README names files that do not exist: {missing}"


def test_code_fences_open_and_close_on_lines_of_their_own():
    fences = [(number, line) for number, line in enumerate(README.splitlines(), 1) if "```" in line]
    stray = [number for number, line in fences if not re.fullmatch(r"```\w*", line.strip())]
    assert not stray, f"README lines {stray}: a ``` fence shares its line with text, so the block never closes"
    opened = [line.strip() for _, line in fences][::2]
    closed = [line.strip() for _, line in fences][1::2]
    assert len(opened) == len(closed) and set(closed) <= {"```"}, "README has an unclosed code block"


PYCON = re.findall(r"^```pycon\n(.*?)^```$", README, flags=re.S | re.M)


def test_python_examples_are_doctests():
    assert len(PYCON) >= 3  # the pretrained-model, edge_qsoftmax and edge_gatv2_logits examples
    assert "```python" not in README, "write README's Python examples as ```pycon blocks (>>> lines), so they are run"


@pytest.mark.parametrize("number", range(len(PYCON)))
def test_python_example_runs(number, offline_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    test = doctest.DocTestParser().get_doctest(PYCON[number], {}, f"README pycon block {number + 1}", "README.md", 0)
    assert_examples_pass([test])
