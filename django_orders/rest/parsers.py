"""The API's JSON parser: DRF's, with a body nested too deep refused as a 400.

Python's JSON decoder recurses once per level of nesting and raises ``RecursionError`` (not the
``ValueError`` DRF turns into a 400) for a body such as ``[[[[...`` 100,000 deep: an anonymous
caller's 500. No order body nests more than a few levels.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that answers a body nested deeper than Python decodes with a 400."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deep.") from None
