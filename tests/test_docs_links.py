"""Every relative link in docs/ and README.md points to a file or folder that exists, and an anchor into a markdown
page to one of its headings (GitHub's slugs), so a page moved or split cannot leave a link dangling."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`]*`")


def _pages() -> list:
    pages = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
    return [p for p in pages if p.exists()]


def _prose(text: str) -> str:
    """The page without its fenced blocks (a link there is an example, not a link)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
        out.append("" if fenced else line)
    return "\n".join(out)


def links(text: str) -> list:
    """The link targets of a markdown page, outside code blocks; inline code spans keep their links (a link's text
    is often code)."""
    return LINK.findall(_prose(text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and underscores dropped, spaces as
    hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0)[1:-1], heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set:
    seen, out = {}, set()
    for line in _prose(text).split("\n"):
        m = re.match(r"^#+ (.*)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken(page: pathlib.Path) -> list:
    problems = []
    for target in links(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            problems.append(f"{target} (no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            problems.append(f"{target} (no heading #{anchor} in {dest.relative_to(ROOT)})")
    return problems


def test_the_link_finder_sees_links_in_prose_and_not_in_code_blocks():
    text = "See [a](a.md#x) and [`b`](b/).\n```\n[c](c.md)\n```\n"
    assert links(text) == ["a.md#x", "b/"]
    assert anchors("# A b\n## A b\n```\n# not a heading\n```\n") == {"a-b", "a-b-1"}
    assert slug("8. `min_tokens` keeps EOS masked (real bug)") == "8-min_tokens-keeps-eos-masked-real-bug"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    problems = broken(page)
    assert not problems, f"{page.relative_to(ROOT)} links to what does not exist: " + "; ".join(problems)
