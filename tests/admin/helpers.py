"""Reading admin HTML in tests without a parser dependency."""

from __future__ import annotations

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


def column_names(response) -> list[str]:
    """The ``column-<name>`` classes of a changelist's header, in order."""
    html = response.content.decode()
    return re.findall(r'<th scope="col" class="[^"]*column-([\w]+)', html)


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
