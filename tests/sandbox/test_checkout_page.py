"""The hosted payment page at the invoice's web URL, as a customer's browser uses it."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
import requests

from orders_sandbox import OrderNotPayable

from .conftest import order_payload

SETTINGS = {
    "redirect_url": "https://shop.example/checkout/return?step=done",
    "cancel_url": "https://shop.example/checkout/cancel",
}


def _create(api, **overrides) -> dict:
    payload = order_payload(checkout_settings=SETTINGS, **overrides)
    payload["line_items"].append(
        {"type": "shipping", "shipping": {"fee": {"currency": "ghs", "value": 1250}}}
    )
    response = api.create(payload)
    assert response.status_code == 200, response.text
    return response.json()["order"]


def _browser() -> requests.Session:
    """A customer's browser: no Authorization header, redirects not followed."""
    return requests.Session()


def _lookup(api, order_id: str) -> dict:
    return api.post("/orders/lookup", {"order_id": order_id}).json()["order"]


def test_get_shows_the_summary_line_items_total_and_both_buttons(api):
    order = _create(api)
    response = _browser().get(order["invoice"]["format"]["web"]["url"], timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "script-src" not in response.headers["Content-Security-Policy"]
    page = response.text
    assert "Ama Mensah" in page
    assert "<td>Consultation</td><td>2</td><td>GHS 50.00</td><td>GHS 100.00</td>" in page
    assert "<td>Shipping</td><td>1</td><td>GHS 12.50</td><td>GHS 12.50</td>" in page
    assert '<td id="total">GHS 112.50</td>' in page
    assert f'action="/pay/{order["id"]}/pay"' in page
    assert f'action="/pay/{order["id"]}/cancel"' in page
    assert "<script" not in page


def test_order_data_is_escaped(api):
    payload = order_payload(number='<img src=x onerror="alert(1)">')
    payload["customer_data"]["name"] = "<script>alert('x')</script>"
    payload["line_items"][0]["product"]["name"] = "Tea & <b>cake</b>"
    order = api.create(payload).json()["order"]
    page = _browser().get(order["invoice"]["format"]["web"]["url"], timeout=10).text
    assert "<script>" not in page and "<img" not in page and "<b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "Tea &amp; &lt;b&gt;cake&lt;/b&gt;" in page


def test_pay_marks_paid_on_the_sandbox_clock_and_redirects_with_the_order_id(api, sandbox):
    order = _create(api)
    sandbox.advance_clock(600)
    response = _browser().post(
        f"{sandbox.url}/pay/{order['id']}/pay", allow_redirects=False, timeout=10
    )
    assert response.status_code == 303
    assert response.headers["Location"] == (
        f"https://shop.example/checkout/return?step=done&order_id={order['id']}"
    )
    paid = _lookup(api, order["id"])
    assert paid["status"] == "paid"
    paid_at = datetime.fromisoformat(paid["paid_at"])
    assert paid_at >= datetime.fromisoformat(order["initiated_at"]) + timedelta(seconds=600)
    # The payment lands in the balance transactions, unsigned, for the order's total.
    [payment] = api.page("/balance_transactions/page").json()["page"]["transactions"]
    assert (payment["type"], payment["order_id"]) == ("payment", order["id"])
    assert payment["amount"] == {"currency": "ghs", "value": 11250}
    # A paid order's page says so, without buttons.
    page = _browser().get(f"{sandbox.url}/pay/{order['id']}", timeout=10).text
    assert '<span id="status">paid</span>' in page and 'id="pay"' not in page


def test_cancel_redirects_with_the_order_id_and_leaves_the_order_payable(api, sandbox):
    order = _create(api)
    response = _browser().post(
        f"{sandbox.url}/pay/{order['id']}/cancel", allow_redirects=False, timeout=10
    )
    assert response.status_code == 303
    assert response.headers["Location"] == (
        f"https://shop.example/checkout/cancel?order_id={order['id']}"
    )
    assert _lookup(api, order["id"]) == order
    # The customer can come back and pay after all.
    assert sandbox.pay_order(order["id"])["status"] == "paid"


@pytest.mark.parametrize("action", ["pay", "cancel"])
def test_a_paid_order_cannot_be_paid_or_backed_out_of_again(api, sandbox, action):
    order = _create(api)
    paid = sandbox.pay_order(order["id"])
    response = _browser().post(
        f"{sandbox.url}/pay/{order['id']}/{action}", allow_redirects=False, timeout=10
    )
    assert response.status_code == 409
    assert "already paid" in response.text
    assert _lookup(api, order["id"]) == paid
    assert len(api.page("/balance_transactions/page").json()["page"]["transactions"]) == 1


def test_a_canceled_order_cannot_be_paid(api, sandbox):
    order = _create(api)
    canceled = api.post("/orders/cancel", {"order_id": order["id"]}).json()["order"]
    response = _browser().post(
        f"{sandbox.url}/pay/{order['id']}/pay", allow_redirects=False, timeout=10
    )
    assert response.status_code == 409
    assert "canceled" in response.text
    assert _lookup(api, order["id"]) == canceled
    with pytest.raises(OrderNotPayable) as caught:
        sandbox.pay_order(order["id"])
    assert caught.value.status == "canceled"


def test_unpaid_orders_expire_lazily_once_the_clock_passes_expires_at(
    sandbox_factory, tmp_path, api
):
    server = sandbox_factory(db_path=tmp_path / "short.sqlite3", order_lifetime=120)
    order = api.create(order_payload(checkout_settings=SETTINGS), server=server).json()["order"]
    expires = datetime.fromisoformat(order["expires_at"])
    assert expires == datetime.fromisoformat(order["initiated_at"]) + timedelta(seconds=120)
    unfinalized = api.create(order_payload(finalize=False), server=server).json()["order"]
    server.advance_clock(119)
    lookup = api.post("/orders/lookup", {"order_id": order["id"]}, server=server)
    assert lookup.json()["order"]["status"] == "requires_payment"
    server.advance_clock(2)
    page = api.post("/orders/page", {}, server=server).json()["page"]["orders"]
    assert [o["status"] for o in page] == ["preparing", "expired"]  # never-finalized stays
    assert page[1]["expires_at"] == order["expires_at"]
    browser = _browser()
    shown = browser.get(f"{server.url}/pay/{order['id']}", timeout=10).text
    assert "expired" in shown and 'id="pay"' not in shown
    refused = browser.post(f"{server.url}/pay/{order['id']}/pay", allow_redirects=False)
    assert refused.status_code == 409
    lookup = api.post("/orders/lookup", {"order_id": order["id"]}, server=server)
    assert lookup.json()["order"]["status"] == "expired"
    cancel = api.post("/orders/cancel", {"order_id": order["id"]}, server=server)
    assert (cancel.status_code, cancel.json()["error"]["code"]) == (400, "order_expired")
    assert unfinalized["status"] == "preparing"


def test_without_checkout_settings_the_outcome_is_shown_on_the_page(api, sandbox):
    order = api.create(order_payload()).json()["order"]
    response = _browser().post(
        f"{sandbox.url}/pay/{order['id']}/pay", allow_redirects=False, timeout=10
    )
    assert response.status_code == 200
    assert "Payment received" in response.text
    assert _lookup(api, order["id"])["status"] == "paid"


def test_a_preparing_order_cannot_be_paid(api, sandbox):
    order = api.create(order_payload(finalize=False)).json()["order"]
    page = _browser().get(f"{sandbox.url}/pay/{order['id']}", timeout=10).text
    assert "not finalized" in page and 'id="pay"' not in page
    with pytest.raises(OrderNotPayable):
        sandbox.pay_order(order["id"])
    with pytest.raises(KeyError):
        sandbox.pay_order("or_nosuchorder")


def test_the_invoice_pdf_is_a_pdf(api):
    order = _create(api)
    response = _browser().get(order["invoice"]["format"]["pdf"]["url"], timeout=10)
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/pdf"
    assert response.content.startswith(b"%PDF-1.4\n")
    assert response.content.rstrip().endswith(b"%%EOF")
    assert order["id"].encode() in response.content
    # The xref offset really points at the table.
    start = int(re.search(rb"startxref\n(\d+)", response.content).group(1))
    assert response.content[start:].startswith(b"xref")


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/pay/or_nosuchorder", 404),
        ("POST", "/pay/or_nosuchorder/pay", 404),
        ("GET", "/pay/", 404),
        ("GET", "/pay/a/b/c", 404),
        ("GET", "/pay/{id}/pay", 405),
        ("POST", "/pay/{id}", 405),
        ("PUT", "/pay/{id}/cancel", 405),
    ],
)
def test_wrong_pages_and_methods(api, sandbox, method, path, status):
    order = _create(api)
    response = _browser().request(
        method, sandbox.url + path.format(id=order["id"]), allow_redirects=False, timeout=10
    )
    assert response.status_code == status
    assert response.headers["Content-Type"].startswith("text/html")
    assert _lookup(api, order["id"])["status"] == "requires_payment"


def test_faults_never_fire_on_the_payment_page(api, sandbox):
    order = _create(api)
    fault = sandbox.add_fault("html_502", None)
    assert _browser().get(f"{sandbox.url}/pay/{order['id']}", timeout=10).status_code == 200
    assert sandbox.faults.active() == [fault]


def test_control_endpoint_pays_an_order(api, sandbox):
    order = _create(api)
    response = api.control(f"orders/{order['id']}/pay")
    assert response.status_code == 200
    assert response.json()["order"] == _lookup(api, order["id"])
    assert response.json()["order"]["status"] == "paid"
    assert api.control(f"orders/{order['id']}/pay").status_code == 409
    assert api.control("orders/or_nosuchorder/pay").status_code == 404
