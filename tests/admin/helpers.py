"""Reading admin HTML in tests without a parser dependency."""

from __future__ import annotations

import html as html_module
import re

from django.contrib.admin.utils import unquote


def result_rows(response) -> dict[str, dict[str, str]]:
    """``{object pk: {field name: cell inner HTML}}`` of a changelist's result table."""
    html = response.content.decode()
    table = html[html.index('<table id="result_list"') :]
    table = table[: table.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S):
        pk = re.search(r'name="_selected_action" value="([^"]+)"', row)
        cells = dict(
            re.findall(r'<t[dh] class="field-([\w]+)[^"]*">(.*?)</t[dh]>', row, flags=re.S)
        )
        if not cells:  # the header row
            continue
        if pk is None:  # no action checkbox: the pk is in the link to the object's page
            pk = re.search(r'<th class="field-[^"]*"><a href="[^"]*/([^/"]+)/change/', row)
        key = unquote(pk.group(1))
        rows[key] = cells
    return rows


def listed_pks(response) -> list[str]:
    """Primary keys of the rows on the page, in display order."""
    return [str(obj.pk) for obj in response.context["cl"].result_list]


def action_names(response) -> list[str]:
    """The actions offered in the changelist's action menu (none if there is no menu)."""
    html = response.content.decode()
    select = re.search(r'<select name="action"[^>]*>(.*?)</select>', html, flags=re.S)
    if select is None:
        return []
    return [value for value in re.findall(r'<option value="([^"]*)"', select.group(1)) if value]


def text(html: str) -> str:
    """Visible text of an HTML fragment, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def unescaped_text(fragment: str) -> str:
    """``text`` with the HTML entities read (``&#x27;`` is the ``'`` staff see)."""
    return html_module.unescape(text(fragment))


def _headers(response) -> list[tuple[str, str]]:
    """(classes, visible label) of each header of the changelist's result table."""
    html = response.content.decode()
    table = html[html.index('<table id="result_list"') :]
    head = table[: table.index("</thead>")]
    cells = re.findall(r'<th scope="col" class="([^"]*)">(.*?)</th>', head, flags=re.S)
    headers = []
    for classes, cell in cells:
        label = re.search(r'<div class="text">(.*?)</div>', cell, flags=re.S)
        headers.append((classes, text(label.group(1)) if label else ""))
    return headers


def column_headers(response) -> list[str]:
    """The changelist's column headers as staff read them, in order (the action checkbox's
    header has no text and is left out)."""
    return [label for _, label in _headers(response) if label]


def sortable_headers(response) -> list[str]:
    """The headers staff can click to sort by, in order."""
    return [label for classes, label in _headers(response) if "sortable" in classes.split()]


def filter_titles(response) -> list[str]:
    """The headings of the changelist's filter sidebar ("By status", ...), in order."""
    html = response.content.decode()
    return [text(title) for title in re.findall(r"<summary>(.*?)</summary>", html, flags=re.S)]


def filter_choices(response, title: str) -> list[str]:
    """The choices one filter of the sidebar offers, as staff read them."""
    html = response.content.decode()
    for block in re.findall(r"<details data-filter-title=.*?</details>", html, flags=re.S):
        if text(re.search(r"<summary>(.*?)</summary>", block, flags=re.S).group(1)) == title:
            return [text(choice) for choice in re.findall(r"<li[^>]*>(.*?)</li>", block, re.S)]
    raise AssertionError(f"no filter {title!r} in {filter_titles(response)}")


def search_box(response) -> str | None:
    """The search box's help text as staff read it ("" without help, None without a box)."""
    html = response.content.decode()
    if 'id="searchbar"' not in html:
        return None
    found = re.search(r'<div class="help" id="searchbar_helptext">(.*?)</div>', html, re.S)
    return unescaped_text(found.group(1)) if found else ""
