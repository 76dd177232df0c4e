"""The fix advice as GitHub shows it: the pull request body, the issue body and summary.md rendered
by cmarkgfm (GitHub's own fork of cmark, the renderer of github.com), not read as source text. The
advice's code spans (`torch.load(path, weights_only=False)`) must render as code; before, md_text
escaped their backticks and GitHub showed "\\`torch.load(...)\\`" as text."""

from __future__ import annotations

import re
from html import unescape

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torch_matrix.vocab.escaping import md_prose, md_text
from tests.factories import make_cell, make_result
from tests.test_real_messages import real_result

try:
    import cmarkgfm
except ImportError:  # loud: a test dependency of pyproject.toml's [test] extra
    pytest.fail(
        "cmarkgfm is not installed: pip install -e '.[test]' (GitHub's Markdown renderer, a test "
        "dependency)",
        pytrace=False,
    )


def rendered(markdown: str) -> str:
    """The HTML GitHub makes of ``markdown`` (GitHub-flavoured: tables, autolinks)."""
    return str(cmarkgfm.github_flavored_markdown_to_html(markdown))


WEIGHTS_ONLY_CODE = (
    "<code>return torch.load(path, weights_only=False)</code>",
    "<code>torch.serialization.add_safe_globals([argparse.Namespace])</code>",
    "<code>return torch.load(path)</code>",
)


def _the_weights_only_run() -> tuple[object, object]:
    broken, _record = real_result("torch2.6-weights_only")
    working = make_result(
        make_cell(torch="2.5.1", python="3.11", torchvision="", probes=("tests",)),
        resolved={"torch": "2.5.1"},
    )
    return working, broken


def _section(html: str, heading: str) -> str:
    """The HTML from ``<h3>heading</h3>`` to the next heading."""
    start = html.index(f"<h3>{heading}</h3>")
    following = html.find("<h3>", start + 1)
    return html[start : following if following > 0 else len(html)]


def test_the_pr_bodys_fix_advice_renders_its_code_as_code():
    from torch_matrix.pins import suggest_pins
    from torch_matrix.pins.pr_body import render_pr_body

    working, broken = _the_weights_only_run()
    suggestion = suggest_pins([working, broken], {"torch": ["2.5.1", "2.6.0"]})
    html = rendered(render_pr_body(suggestion))
    fix = _section(html, "Fix first")
    for code in WEIGHTS_ONLY_CODE:
        assert code in fix, fix
    assert "`" not in re.sub(r"<code>.*?</code>", "", fix)  # no backtick shown as text
    assert "\\" not in fix  # nor a backslash of an escape
    assert "<code>torch&lt;2.6</code>" in _section(html, "Pins (the alternative)") or (
        "torch&lt;2.6" in _section(html, "Pins (the alternative)")
    )


def test_the_issue_bodys_fix_advice_renders_its_code_as_code():
    from torch_matrix.report.diff import NewFailure
    from torch_matrix.report.diff_render import issue_body

    _working, broken = _the_weights_only_run()
    probe = broken.probes[0]
    body = issue_body(
        NewFailure(
            broken.cell.id, probe.name, "fail", probe.message, "", ("torch==2.6.0",), "3.11", None
        )
    )
    fix = _section(rendered(body), "Fix first")
    # the issue body diagnoses the message alone (no frames): the generic call, rendered as code
    assert "<code>torch.load(path, weights_only=False)</code>" in fix, fix
    assert "<code>torch.serialization.add_safe_globals(" in fix, fix
    assert "`" not in re.sub(r"<code>.*?</code>", "", fix)


def test_the_summarys_fix_first_renders_its_code_as_code():
    from torch_matrix.report.markdown import render_markdown_summary
    from torch_matrix.report.rows import judge

    _working, broken = _the_weights_only_run()
    html = rendered(render_markdown_summary(judge([broken])))
    fix = _section(html, "✎ Fix first")
    for code in WEIGHTS_ONLY_CODE:
        assert code in fix, fix
    assert "`" not in re.sub(r"<code>.*?</code>", "", fix)


@pytest.mark.parametrize(
    "advice, html",
    [
        ("add `setuptools<82` to the cell", "add <code>setuptools&lt;82</code> to the cell"),
        ("`numpy<2` first", "<code>numpy&lt;2</code> first"),
        ("a lone ` backtick", "a lone ` backtick"),  # no span: the backtick is text
        ("`a``b`", "`a``b`"),  # spans touching: not read as code (Markdown would merge them)
        ("# `x` <b>bold</b> [l](http://e.x) @dev", None),
    ],
)
def test_md_prose_renders_spans_as_code_and_all_else_as_text(advice, html):
    out = rendered(md_prose(advice))
    if html is not None:
        assert out == f"<p>{html}</p>\n"
    else:  # nothing the advice holds becomes a heading, HTML, a link or a mention
        assert out.startswith("<p>") and "<b>" not in out and "<a " not in out
        assert "<code>x</code>" in out and "@\u200bdev" in out


@given(st.text(alphabet=st.characters(blacklist_characters="`"), max_size=60))
def test_without_backticks_md_prose_is_md_text(text):
    assert md_prose(text) == md_text(text)


@given(
    st.lists(
        st.text(
            alphabet=st.characters(
                blacklist_categories=("Cs", "Cc", "Zl", "Zp", "Cf"), blacklist_characters="`"
            ),
            min_size=1,
            max_size=20,
        ).filter(lambda s: s.strip() == s and s.strip() != ""),
        min_size=1,
        max_size=3,
    )
)
def test_every_span_renders_as_code_holding_its_text(spans):
    advice = "use " + " or ".join(f"`{span}`" for span in spans) + " here"
    out = rendered(md_prose(advice))
    codes = [unescape(code) for code in re.findall(r"<code>(.*?)</code>", out)]
    assert codes == [" ".join(span.split()) for span in spans]
