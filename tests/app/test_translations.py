"""The customer's pages are translatable, and ship a French translation that is complete for
them and compiled as it is written."""

from __future__ import annotations

import gettext
import re
from pathlib import Path

import pytest
from django.urls import reverse

from django_orders.services import create_order
from tests.fixtures.payloads import create_order_input

LOCALE = Path(__file__).resolve().parents[2] / "django_orders" / "locale"
PO = LOCALE / "fr" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
CUSTOMER_TEMPLATES = "templates/django_orders/"


def _text(block: str) -> str:
    escapes = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    joined = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', block))
    return re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(0)), joined)


def po_entries() -> list[dict[str, object]]:
    """The catalog's entries: references, msgid, and msgstr (or the plural forms)."""
    entries = []
    for block in PO.read_text(encoding="utf-8").split("\n\n"):
        msgid = re.search(r'^msgid ((?:".*"\n?)+)', block, re.M)
        if msgid is None or not _text(msgid.group(1)):
            continue  # the header
        plural = re.findall(r'^msgstr\[\d\] ((?:".*"\n?)+)', block, re.M)
        single = re.search(r'^msgstr ((?:".*"\n?)+)', block, re.M)
        entries.append(
            {
                "refs": " ".join(re.findall(r"^#: (.*)$", block, re.M)),
                "msgid": _text(msgid.group(1)),
                "msgstr": [_text(form) for form in plural] if plural else _text(single.group(1)),
                "fuzzy": "#, fuzzy" in block,
            }
        )
    return entries


def test_every_string_of_the_customer_pages_is_translated_into_french():
    customer = [entry for entry in po_entries() if CUSTOMER_TEMPLATES in entry["refs"]]
    assert len(customer) >= 25
    untranslated = [
        entry["msgid"]
        for entry in customer
        if entry["fuzzy"]
        or not all(entry["msgstr"] if isinstance(entry["msgstr"], list) else [entry["msgstr"]])
    ]
    assert untranslated == []


def test_the_compiled_catalog_is_the_one_written():
    with MO.open("rb") as compiled:
        catalog = gettext.GNUTranslations(compiled)
    for entry in po_entries():
        if entry["fuzzy"] or not entry["msgstr"] or isinstance(entry["msgstr"], list):
            continue
        assert catalog.gettext(entry["msgid"]) == entry["msgstr"], entry["msgid"]
    assert catalog.info()["language"] == "fr"


@pytest.mark.django_db(transaction=True)
def test_the_return_page_speaks_french(client, settings, live_orders, sleeps):
    settings.LANGUAGE_CODE = "fr"
    order = create_order(**create_order_input(), finalize=True, reference="cart-fr")
    unpaid = client.get(reverse("django_orders:return"), {"order_id": order.id}).content.decode()
    assert "Nous confirmons votre paiement" in unpaid
    assert "Cette page vérifie à nouveau dans" in unpaid
    live_orders.pay_order(order.id)
    paid = client.get(reverse("django_orders:return"), {"order_id": order.id}).content.decode()
    assert "<h2>Payée</h2>" in paid and "nous avons bien reçu votre paiement de" in paid
    assert "Thank you" not in paid
