"""The hosted payment page: what a customer's browser sees at the invoice's web URL.

``GET /pay/<order_id>`` with "Pay" and "Cancel"; each POST redirects (303) to the order's
``checkout_settings`` URL with ``order_id=<id>``, as the provider's does. No API key (the
customer's browser), no JavaScript, every piece of order data escaped; ``.../invoice.pdf`` and
``.../receipt`` serve the documents the order's links name.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from .errors import Reply
from .lifecycle import OrderNotPayable

if TYPE_CHECKING:
    from .service import Service

PREFIX = "/pay/"
_ROUTE = re.compile(r"/pay/([A-Za-z0-9_]{1,128})(?:/(pay|cancel|invoice\.pdf|receipt))?")
#: Minor-unit digits of the contract's currencies (all two today); the formatter reads this.
MINOR_DIGITS = {"ghs": 2, "usd": 2, "gbp": 2, "eur": 2, "cny": 2}
_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_STATE_TEXT = {
    "paid": "This order is already paid. Nothing more to do.",
    "completed": "This order is already paid and completed.",
    "canceled": "This order was canceled; it can no longer be paid.",
    "expired": "This payment link has expired; ask the shop for a new order.",
    "preparing": "This order is not finalized yet; it cannot be paid.",
}


def money(value: int, currency: str) -> str:
    """``2450, "eur"`` -> ``EUR 24.50`` (minor-unit digits from the table, default 2)."""
    digits = MINOR_DIGITS.get(currency.lower(), 2)
    sign = "-" if value < 0 else ""
    whole, minor = divmod(abs(value), 10**digits)
    text = f"{whole:,}" + (f".{minor:0{digits}d}" if digits else "")
    return f"{currency.upper()} {sign}{text}"


def with_order_id(url: str, order_id: str) -> str:
    """``url`` with ``order_id=<id>`` appended to its query, everything else kept as sent."""
    parts = urlsplit(url)
    extra = urlencode({"order_id": order_id})
    query = f"{parts.query}&{extra}" if parts.query else extra
    return urlunsplit(parts._replace(query=query))


def handle(service: Service, method: str, path: str) -> Reply:
    """Answer one request under ``/pay/``."""
    match = _ROUTE.fullmatch(path)
    if match is None:
        return _page(404, "Not found", "<p>There is no payment page here.</p>")
    order_id, action = match.group(1), match.group(2)
    allowed = "POST" if action in ("pay", "cancel") else "GET"
    if method != allowed and not (method == "HEAD" and allowed == "GET"):
        reply = _page(405, "Method not allowed", f"<p>Use {allowed}.</p>")
        reply.headers["Allow"] = allowed
        return reply
    order = service.lifecycle.order(order_id)
    if order is None:
        return _page(404, "Order not found", "<p>No order has this payment link.</p>")
    if action == "invoice.pdf":
        pdf = invoice_pdf(order)
        return Reply(200, pdf, content_type="application/pdf", headers=dict(_HEADERS))
    if action == "receipt":
        if order.get("status") not in ("paid", "completed"):
            return _page(404, "No receipt", "<p>This order is not paid: it has no receipt.</p>")
        return _summary(order, 200, title="Receipt")
    if action == "pay":
        try:
            order = service.lifecycle.pay(order_id)
        except OrderNotPayable as exc:
            return _summary(order, 409, notice=_STATE_TEXT.get(exc.status))
        return _leave(order, "redirect_url", "Payment received", "Thank you: the order is paid.")
    if action == "cancel":
        if order.get("status") != "requires_payment":
            return _summary(order, 409)
        return _leave(
            order, "cancel_url", "Payment not made", "You left the payment page; nothing was paid."
        )
    return _summary(order, 200)


def _leave(order: dict[str, Any], setting: str, title: str, text: str) -> Reply:
    """Redirect (303) to the shop's URL for this outcome, or say it here without one."""
    url = (order.get("checkout_settings") or {}).get(setting)
    if not url:
        return _summary(order, 200, notice=text, title=title)
    headers = {**_HEADERS, "Location": with_order_id(url, order["id"])}
    return Reply(303, b"", content_type="text/plain; charset=utf-8", headers=headers)


def _summary(
    order: dict[str, Any], status: int, *, notice: str | None = None, title: str | None = None
) -> Reply:
    e = html.escape
    state = str(order.get("status"))
    group = order.get("line_item_group") or {}
    rows = "".join(_line_row(item) for item in group.get("line_items") or [])
    total = group.get("total") or {}
    total_text = money(total["value"], total["currency"]) if total.get("currency") else "-"
    customer = (order.get("customer") or {}).get("name") or ""
    number = order.get("number") or order["id"]
    parts = [
        f"<p>Order <strong>{e(str(number))}</strong> for {e(str(customer))}</p>",
        f'<p class="status">Status: <span id="status">{e(state)}</span></p>',
    ]
    if notice or state in _STATE_TEXT:
        parts.append(f'<p class="notice">{e(notice or _STATE_TEXT[state])}</p>')
    parts.append(
        "<table><thead><tr><th>Item</th><th>Quantity</th><th>Unit price</th><th>Amount</th>"
        f"</tr></thead><tbody>{rows}</tbody><tfoot><tr><th colspan=3>Total</th>"
        f'<td id="total">{e(total_text)}</td></tr></tfoot></table>'
    )
    if state == "requires_payment" and notice is None:
        base = f"/pay/{e(order['id'])}"
        parts.append(
            f'<form method="post" action="{base}/pay"><button type="submit" id="pay">'
            f"Pay {e(total_text)}</button></form>"
            f'<form method="post" action="{base}/cancel"><button type="submit" id="cancel">'
            "Cancel</button></form>"
        )
    return _page(status, title or "Pay your order", "".join(parts))


def _line_row(item: dict[str, Any]) -> str:
    e = html.escape
    kind = item.get("type")
    body = item.get(kind) if isinstance(kind, str) else None
    if not isinstance(body, dict):
        return ""
    if kind == "product":
        price, quantity = body.get("price") or {}, body.get("quantity") or 1
        unit = money(price.get("value", 0), price.get("currency", ""))
        amount = money(price.get("value", 0) * quantity, price.get("currency", ""))
        name = body.get("name") or "Product"
    else:
        fee = body.get("amount" if kind == "fee" else "fee") or {}
        quantity, unit = 1, money(fee.get("value", 0), fee.get("currency", ""))
        amount = unit
        name = body.get("label") or ("Shipping" if kind == "shipping" else "Fee")
    return (
        f"<tr><td>{e(str(name))}</td><td>{e(str(quantity))}</td><td>{e(unit)}</td>"
        f"<td>{e(amount)}</td></tr>"
    )


def _page(status: int, title: str, body: str) -> Reply:
    text = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)} - orders sandbox</title><style>"
        "body{font-family:sans-serif;max-width:40em;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;width:100%;margin:1em 0}"
        "td,th{border-bottom:1px solid #ddd;padding:.4em;text-align:left}"
        "form{display:inline-block;margin-right:1em}button{font-size:1.1em;padding:.4em 1em}"
        f"</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )
    body_bytes = text.encode("utf-8")
    return Reply(
        status, body_bytes, content_type="text/html; charset=utf-8", headers=dict(_HEADERS)
    )


def invoice_pdf(order: dict[str, Any]) -> bytes:
    """A one-page PDF naming the order and its total (ASCII only: ids and amounts)."""
    total = (order.get("line_item_group") or {}).get("total") or {}
    line = f"Invoice for order {order['id']}"
    if total.get("currency"):
        line += f" - total {money(total['value'], total['currency'])}"
    line = re.sub(r"[^A-Za-z0-9 _.,:-]", "", line)
    stream = f"BT /F1 12 Tf 50 780 Td ({line}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842]"
        b" /Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)
