"""Who sees what: view-only staff browse everything and change nothing; the key is on no page."""

from __future__ import annotations

import pytest
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_orders import services
from django_orders.models import Customer, Order, OrderRequest, SyncRun

from .factories import make_customer, make_order, make_request, make_sync_run, staff_user
from .helpers import action_names

pytestmark = pytest.mark.django_db
MODELS = (Order, Customer, OrderRequest, SyncRun)


def url(model, view: str, *args) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


@pytest.fixture
def rows():
    customer = make_customer("cu_perm", "Ama Mensah")
    order = make_order("or_perm", customer, status="requires_payment")
    request = make_request("key-perm", reference="cart-perm", order=order)
    run = make_sync_run()
    return {Order: order, Customer: customer, OrderRequest: request, SyncRun: run}


def test_view_only_staff_browse_every_page(viewer_client, rows):
    assert viewer_client.get(reverse("admin:index")).status_code == 200
    assert viewer_client.get(reverse("admin:app_list", args=["django_orders"])).status_code == 200
    for model, obj in rows.items():
        assert viewer_client.get(url(model, "changelist")).status_code == 200
        assert viewer_client.get(url(model, "change", quote(obj.pk))).status_code == 200
        assert viewer_client.get(url(model, "history", quote(obj.pk))).status_code == 200


def test_view_only_staff_see_no_action(viewer_client, rows):
    for model in MODELS:
        response = viewer_client.get(url(model, "changelist"))
        assert action_names(response) == [], model
        html = response.content.decode()
        assert 'name="_selected_action"' not in html
        assert url(model, "add") not in html


def test_view_only_staff_cannot_run_the_actions_by_posting(viewer_client, rows, monkeypatch):
    calls = []
    monkeypatch.setattr(services, "resend_order_request", calls.append)
    monkeypatch.setattr(services, "refresh_orders", calls.append)
    for model, action in ((OrderRequest, "resend_now"), (Order, "refresh_from_api")):
        for extra in ({"index": "0"}, {"post": "yes"}):
            response = viewer_client.post(
                url(model, "changelist"),
                {"action": action, helpers.ACTION_CHECKBOX_NAME: [rows[model].pk], **extra},
            )
            assert response.status_code in (200, 302)
            assert "resend_confirmation" not in response.content.decode()
    assert calls == []
    assert OrderRequest.objects.get().attempts == 0


def test_change_permission_shows_exactly_the_actions(operator_client, rows):
    requests_page = operator_client.get(url(OrderRequest, "changelist"))
    assert action_names(requests_page) == ["resend_now"]
    assert action_names(operator_client.get(url(Order, "changelist"))) == ["refresh_from_api"]
    assert action_names(operator_client.get(url(Customer, "changelist"))) == []
    assert action_names(operator_client.get(url(SyncRun, "changelist"))) == []
    # the detail pages stay read-only for them too
    html = operator_client.get(url(Order, "change", quote("or_perm"))).content.decode()
    assert 'name="_save"' not in html


def test_each_action_needs_its_own_change_permission(client, rows):
    views = [f"view_{model._meta.model_name}" for model in MODELS]
    client.force_login(staff_user("resender", *views, "change_orderrequest"))
    assert action_names(client.get(url(OrderRequest, "changelist"))) == ["resend_now"]
    assert action_names(client.get(url(Order, "changelist"))) == []
    client.force_login(staff_user("refresher", *views, "change_order"))
    assert action_names(client.get(url(OrderRequest, "changelist"))) == []
    assert action_names(client.get(url(Order, "changelist"))) == ["refresh_from_api"]


def test_superuser_sees_the_actions_but_no_delete(admin_client, rows):
    assert action_names(admin_client.get(url(OrderRequest, "changelist"))) == ["resend_now"]
    assert action_names(admin_client.get(url(Order, "changelist"))) == [
        "refresh_from_api",
        "cancel_orders",
        "mark_fulfilled",
        "send_receipts",
        "send_invoices",
        "export_csv",
        "record_offline_payments",
    ]


def test_staff_without_permissions_see_nothing(client, rows):
    client.force_login(staff_user("nobody"))
    for model, obj in rows.items():
        assert client.get(url(model, "changelist")).status_code == 403
        assert client.get(url(model, "change", quote(obj.pk))).status_code == 403
    index = client.get(reverse("admin:index")).content.decode()
    assert "permission to view or edit anything" in index
    assert url(Order, "changelist") not in index


SECRET = "sk_live_ADMIN_PAGES_MUST_NEVER_SHOW_THIS_0123456789"


def test_the_api_key_appears_on_no_admin_page(admin_client, rows, settings):
    settings.DJANGO_ORDERS = {"API_KEY": SECRET, "BASE_URL": "http://127.0.0.1:9", "MAX_RETRIES": 0}
    pages = [reverse("admin:index"), reverse("admin:app_list", args=["django_orders"])]
    for model, obj in rows.items():
        pages += [
            url(model, "changelist"),
            url(model, "changelist") + "?q=cu_perm",
            url(model, "change", quote(obj.pk)),
            url(model, "history", quote(obj.pk)),
        ]
    pages += [url(Order, "changelist") + "?status__exact=requires_payment&initiated_at__year=2026"]
    for page in pages:
        response = admin_client.get(page, follow=True)
        assert response.status_code == 200, page
        assert SECRET not in response.content.decode(), page
    confirmation = admin_client.post(
        url(OrderRequest, "changelist"),
        {
            "action": "resend_now",
            helpers.ACTION_CHECKBOX_NAME: [rows[OrderRequest].pk],
            "index": "0",
        },
    )
    assert "resend_confirmation" in confirmation.templates[0].name
    assert SECRET not in confirmation.content.decode()
    # an action that fails (nothing listens on port 9) reports the error without the key
    failed = admin_client.post(
        url(Order, "changelist"),
        {"action": "refresh_from_api", helpers.ACTION_CHECKBOX_NAME: ["or_perm"], "index": "0"},
        follow=True,
    )
    html = failed.content.decode()
    assert "The refresh stopped" in html
    assert SECRET not in html
