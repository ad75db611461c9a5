"""The README is the first hour and links to the documentation site for the rest (issue 53,
item 9): every link it gives leads somewhere, it stays short, the settings reference it sends
readers to lists every key, and the health URLs the tests mount are the ones it shows."""

from __future__ import annotations

import re
from pathlib import Path

from django_orders.conf.table import SETTINGS
from tests.conftest import REPO_ROOT

README = REPO_ROOT / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: "At most about 600 lines" (the issue); a little room, so that a short paragraph for a new
#: capability fits, and a failure when the README starts to grow back into the reference.
MAX_README_LINES = 640


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub and MkDocs' toc give the headings: lower case, punctuation dropped,
    spaces as hyphens (the two agree for the plain headings these documents use)."""
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, re.M):
        text = re.sub(r"[`*]", "", heading).strip().lower()
        anchors.add(re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", text)))
    return anchors


def local_links(markdown: str) -> list[str]:
    return [target for target in LINK.findall(markdown) if not re.match(r"[a-z]+:", target)]


def test_every_link_of_the_readme_leads_to_a_file_and_heading_that_exist():
    text = README.read_text(encoding="utf-8")
    links = local_links(text)
    assert any(link.startswith("docs/") for link in links)  # the test reads what it should
    broken = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (REPO_ROOT / path) if path else README
        if not target.is_file():
            broken.append(f"{link}: no file {path}")
        elif anchor and anchor not in heading_anchors(target.read_text(encoding="utf-8")):
            broken.append(f"{link}: no heading #{anchor} in {path or 'README.md'}")
    assert broken == []


def test_the_anchor_reader_tells_a_missing_heading():
    anchors = heading_anchors("## Background tasks: cron or tasks\n### `Order.line_items`\n")
    assert anchors == {"background-tasks-cron-or-tasks", "orderline_items"}
    assert "health-checks" not in anchors


def test_the_readme_stays_the_first_hour():
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move the detail to docs/"


def test_the_settings_reference_lists_every_key():
    reference = (REPO_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([A-Z_]+)` \|", reference, re.M))
    assert listed == set(SETTINGS)


def test_the_health_urls_the_tests_mount_are_the_readmes():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Health checks") :]
    block = re.search(r"```python\n(.*?)^```", section, re.S | re.M)
    assert block, "README 'Health checks' has no python block"
    shown = block.group(1).split("# urls.py\n", 1)[1].strip()
    mounted = (Path(__file__).parents[1] / "health" / "readme_urls.py").read_text(encoding="utf-8")
    assert shown in mounted
