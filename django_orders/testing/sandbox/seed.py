"""Generation of realistic, deterministic records for the sandbox store.

Seeded data exercises what a client may meet in the wild (guests, names in many scripts, every
timestamp form and status the spec allows, fields it does not list), and fast: records are
written straight into JSON text from templates (the JSON encoder would cost more than the rest).
"""

from __future__ import annotations

import hashlib
import json
import random
import string
import time
from dataclasses import dataclass, field
from typing import Any

from . import money_shapes as ledger

_ALNUM = string.ascii_letters + string.digits
_EPOCH_2026 = 1767225600  # 2026-01-01T00:00:00Z: seeded history starts here.
_STEP_SECONDS = 37  # Spacing of seeded orders: 100,000 orders span ~43 days.
_SETTLED_AFTER = 3606  # Seconds after initiation past a seeded order's last timestamp.
#: A seeded payment's money is available this long after it was paid (``available_at``).
SEEDED_AVAILABLE_AFTER = 1800
#: A payout round every this many seeded orders: one payout per currency with money available.
SEEDED_PAYOUT_EVERY = 50

FIRST_NAMES = (
    "José", "Zoë", "François", "Łukasz", "Søren", "Ayşe", "Nguyễn", "Ana", "John", "Mary",
    "Γιώργος", "Ελένη", "Дмитрий", "Анна", "Олена", "محمد", "فاطمة", "יוסף",
    "王", "李", "佐藤", "김", "राहुल", "प्रिया", "Kwame", "Ama", "Chidi", "Åsa",
)  # fmt: skip
LAST_NAMES = (
    "García", "Müller", "Dvořák", "O'Brien", "Nowak", "Øster", "Yilmaz", "Smith",
    "Παπαδόπουλος", "Иванов", "Шевченко", "العلي", "כהן", "伟", "娜", "太郎", "민준",
    "शर्मा", "Mensah", "Boateng", "Okafor", "Lindqvist", "de la Cruz", "Nakamura",
)  # fmt: skip
PRODUCTS = (
    ("T-shirt", "physical"), ("E-book", "digital"), ("Consultation", "service"),
    ("Gift card", "voucher"), ("Engraving", "custom"), ("Donation", "cause"),
    ("Café crème", "physical"), ("Кофе", "physical"), ("茶叶", "physical"),
)  # fmt: skip
CURRENCIES = ("ghs", "usd", "gbp", "eur", "cny")  # the provider's five (api-notes.md)
OFFSETS = ("Z", "+00:00", "+05:30", "-03:00", "+01:00", "+09:00", "-08:00", "+05:45", "-09:30")
# Only the provider's statuses (its SDK refuses others); "unknown" is one of them.
STATUSES = (
    ("requires_payment", 45), ("completed", 38), ("paid", 5), ("canceled", 4),
    ("expired", 4), ("preparing", 2), ("unknown", 2),
)  # fmt: skip
#: The status of an order that can still be paid (``lifecycle``, ``fulfilment``).
PAYABLE = "requires_payment"
_STATUS_NAMES = [name for name, _ in STATUSES]
_STATUS_WEIGHTS = [weight for _, weight in STATUSES]


def _offset_seconds(offset: str) -> int:
    if offset == "Z":
        return 0
    sign = -1 if offset[0] == "-" else 1
    return sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60)


_OFFSET_TABLE = tuple((offset, _offset_seconds(offset)) for offset in OFFSETS)


def _ms(epoch: float) -> int:
    return int(epoch * 1000)  # whole ms, as the wire shows them (and ``iso_z``)


def random_id(prefix: str, rng: random.Random, length: int = 24) -> str:
    """Prefix plus ``length`` random letters and digits (the real ids' alphabet)."""
    return prefix + "".join(rng.choices(_ALNUM, k=length))


def fast_id(prefix: str, rng: random.Random) -> str:
    """Prefix plus 24 random hex characters: a subset of the real alphabet, and
    several times cheaper than :func:`random_id` when seeding 100,000 records."""
    return prefix + format(rng.getrandbits(96), "024x")


def _pick(seq: tuple[Any, ...] | list[Any], rng: random.Random) -> Any:
    return seq[int(rng.random() * len(seq))]


def timestamp(epoch: float, rng: random.Random) -> str:
    """One instant in a randomly chosen allowed form (offset and 0-7 fraction digits)."""
    offset, seconds = _pick(_OFFSET_TABLE, rng)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(epoch) + seconds))
    digits = int(rng.random() * 8)
    if digits:
        text += "." + str(int(rng.random() * 10**digits)).zfill(digits)
    return text + offset


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

#: Stands for the sandbox's own address in stored invoice URLs; the service replaces it with
#: the serving URL on the way out, so the hosted page links survive a restart on a new port.
BASE_URL_TOKEN = "@@SANDBOX_URL@@"  # noqa: S105 (a placeholder, not a secret)


def invoice_json(order_id: str) -> str:
    """The invoice of a finalized order: the hosted payment page and its PDF."""
    return (
        f'{{"number":null,"format":{{"web":{{"url":"{BASE_URL_TOKEN}/pay/{order_id}"}},'
        f'"pdf":{{"url":"{BASE_URL_TOKEN}/pay/{order_id}/invoice.pdf"}}}}}}'
    )


def customer_fingerprint(email: str, phone: str) -> str:
    """A stable fingerprint of a customer's contact details (the provider's dedup key)."""
    return "cfp_" + hashlib.sha256(f"{email}|{phone}".encode()).hexdigest()[:24]


@dataclass
class Batch:
    """Rows ready for ``executemany``, JSON text built once, oldest first."""

    #: id, customer id, json, updated_ms (the search index's ``updated_at``, epoch ms)
    orders: list[tuple[str, str, str, int]] = field(default_factory=list)
    customers: list[tuple[str, str, int]] = field(default_factory=list)  # id, json, updated_ms
    transactions: list[tuple[str, str]] = field(default_factory=list)  # id, json
    payouts: list[tuple[str, str, int]] = field(default_factory=list)  # id, json, updated_ms


@dataclass(frozen=True)
class Customer:
    id: str
    guest: bool
    name_json: str
    email: str
    phone: str
    json: str


_NAMES_JSON = tuple(_dumps(f"{first} {last}") for first in FIRST_NAMES for last in LAST_NAMES)
_PRODUCTS_JSON = tuple((_dumps(name), kind) for name, kind in PRODUCTS)
_PAYMENT_STATUSES = frozenset({"paid", "completed"})


class RecordFactory:
    """Builds customers, orders, payments and payouts from one random stream."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def customer(self, guest: bool, created: float) -> Customer:
        rng = self.rng
        cid = fast_id("cu_", rng)
        name = _pick(_NAMES_JSON, rng)
        email = f"user{int(rng.random() * 10**8)}@example.com"
        phone = f"+233{10**8 + int(rng.random() * 9 * 10**8)}"
        created_at = timestamp(created, rng)
        balance = "{}"
        extra = ""
        if not guest:
            street = 1 + int(rng.random() * 199)
            extra = f',"billing_address":{{"line1":"{street} Ring Road","country":"GH"}}'
            balance = (
                f'{{"ghs":{{"as_of":"{created_at}",'
                f'"available":{{"currency":"ghs","value":{int(rng.random() * 10_000)}}}}}}}'
            )
        text = (
            f'{{"id":"{cid}","guest":{"true" if guest else "false"},"name":{name},'
            f'"email_address":"{email}","phone_number":"{phone}",'
            f'"fingerprint":"{customer_fingerprint(email, phone)}","balance":{balance},'
            f'"created_at":"{created_at}"{extra}}}'
        )
        return Customer(cid, guest, name, email, phone, text)

    def line_item_group(self) -> tuple[str, str, int]:
        """Return (json, currency, total)."""
        rng = self.rng
        currency = _pick(CURRENCIES, rng)
        items = []
        total = 0
        for _ in range(1 + int(rng.random() * 3)):
            name, kind = _pick(_PRODUCTS_JSON, rng)
            value, quantity = 100 + int(rng.random() * 49_900), 1 + int(rng.random() * 3)
            total += value * quantity
            items.append(
                f'{{"type":"product","product":{{"id":"{fast_id("oli_", rng)}","name":{name},'
                f'"type":"{kind}","price":{{"currency":"{currency}","value":{value}}},'
                f'"quantity":{quantity}}}}}'
            )
        if rng.random() < 0.3:
            value = 500 + int(rng.random() * 2000)
            total += value
            items.append(
                f'{{"type":"shipping","shipping":{{"id":"{fast_id("ols_", rng)}",'
                f'"label":"Delivery","fee":{{"currency":"{currency}","value":{value}}}}}}}'
            )
        text = (
            f'{{"line_items":[{",".join(items)}],'
            f'"total":{{"currency":"{currency}","value":{total}}}}}'
        )
        return text, currency, total

    def order(
        self, customer: Customer, initiated: float, status: str
    ) -> tuple[str, str, str, int, float | None]:
        """Return (order id, json, currency, total, epoch it was paid at or None)."""
        rng = self.rng
        oid = fast_id("or_", rng)
        contact = ""
        if rng.random() < 0.5:
            contact = f',"email_address":"{customer.email}","phone_number":"{customer.phone}"'
        guest = "true" if customer.guest else "false"
        number = f'"ORD-{int(rng.random() * 10**6):06d}"' if rng.random() < 0.6 else "null"
        custom = f'{{"cart_id":"{fast_id("cart_", rng)}"}}' if rng.random() < 0.3 else "null"
        group, currency, total = self.line_item_group()
        parts = [
            f'{{"id":"{oid}","number":{number},"status":"{status}",'
            f'"initiated_at":"{timestamp(initiated, rng)}",'
            f'"customer":{{"id":"{customer.id}","guest":{guest},"name":{customer.name_json}{contact}}},'
            f'"line_item_group":{group},"custom_data":{custom}'
        ]
        if status != "preparing":  # every other status was finalized first
            parts.append(
                f',"sealed_at":"{timestamp(initiated + 1, rng)}","invoice":{invoice_json(oid)}'
            )
        later = initiated + 30 + int(rng.random() * 3570)
        paid: float | None = None
        if status in _PAYMENT_STATUSES:
            paid = later
            parts.append(f',"paid_at":"{timestamp(later, rng)}"')
        if status == "completed":
            parts.append(f',"completed_at":"{timestamp(later + 5, rng)}"')
        elif status == "canceled":
            parts.append(f',"canceled_at":"{timestamp(later, rng)}"')
        elif status in ("requires_payment", "expired"):
            parts.append(f',"expires_at":"{timestamp(initiated + 86_400, rng)}"')
        parts.append("}")
        return oid, "".join(parts), currency, total, paid

    def payment(
        self, order_id: str, currency: str, total: int, initiated: float, paid: float
    ) -> dict[str, Any]:
        """An order's ``payment`` with its payment transaction embedded (``ledger``'s shapes),
        the money available ``SEEDED_AVAILABLE_AFTER`` seconds after payment."""
        rng = self.rng
        payment_id = fast_id("pay_", rng)
        amount = ledger.money(currency, total)
        paid_at = timestamp(paid, rng)
        transaction = ledger.payment_transaction(
            fast_id("bt_", rng),
            order_id,
            payment_id,
            amount,
            paid_at,
            timestamp(paid + SEEDED_AVAILABLE_AFTER, rng),
        )
        return ledger.payment(payment_id, amount, timestamp(initiated, rng), paid_at, transaction)

    def payout(
        self, currency: str, transactions: list[dict[str, Any]], moment: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A succeeded payout of the available money of ``transactions`` (their allocations
        completed) and its own debit transaction."""
        rng = self.rng
        pid = fast_id("po_", rng)
        initiated, done = timestamp(moment, rng), timestamp(moment + 120, rng)
        items = []
        for transaction in transactions:
            value = transaction["available_amount"]["value"]
            ledger.allocate(transaction, "payout", pid, value, initiated, fast_id("bta_", rng))
            ledger.complete(transaction, "payout", pid, done)
            items.append(
                {
                    "id": transaction["id"],
                    "amount": dict(transaction["amount"]),
                    "allocated_amount": ledger.money(currency, value),
                }
            )
        payout = ledger.payout_record(
            pid,
            items,
            currency,
            initiated,
            timestamp(moment + 86_400, rng),
            reference=f"PO-{pid[3:13].upper()}",
            destination_id=fast_id("fa_", rng),
        )
        debit = ledger.source_transaction(
            fast_id("bt_", rng), "payout", pid, payout["amount"], done, None
        )
        payout.update(
            status="succeeded",
            sent_at=timestamp(moment + 60, rng),
            succeeded_at=done,
            balance_transaction_id=debit["id"],
        )
        return payout, debit


class _Money:
    """The seeded money, kept as records until the batch is written: payouts allocate the
    transactions of orders seeded before them, and each order embeds its transaction."""

    def __init__(self, factory: RecordFactory) -> None:
        self.factory = factory
        self.payments: dict[str, dict[str, Any]] = {}  # order id -> payment
        self.transactions: list[dict[str, Any]] = []
        self.payouts: list[tuple[dict[str, Any], float]] = []  # payout, updated epoch
        # currency -> (epoch its money is available, transaction), not paid out yet
        self.waiting: dict[str, list[tuple[float, dict[str, Any]]]] = {}

    def paid(self, order_id: str, currency: str, total: int, initiated: float, paid: float) -> None:
        payment = self.factory.payment(order_id, currency, total, initiated + 1, paid)
        self.payments[order_id] = payment
        self.transactions.append(payment["balance_transaction"])
        self.waiting.setdefault(currency, []).append(
            (paid + SEEDED_AVAILABLE_AFTER, payment["balance_transaction"])
        )

    def pay_out(self, moment: float) -> None:
        """One payout per currency of every transaction whose money is available by ``moment``."""
        for currency in sorted(self.waiting):
            ready = [tx for at, tx in self.waiting[currency] if at <= moment]
            if not ready:
                continue
            self.waiting[currency] = [(at, tx) for at, tx in self.waiting[currency] if at > moment]
            payout, debit = self.factory.payout(currency, ready, moment)
            self.payouts.append((payout, moment + 120))
            self.transactions.append(debit)

    def write(self, batch: Batch, orders: list[tuple[str, str, str, int]]) -> None:
        for oid, customer_id, text, updated in orders:
            payment = self.payments.get(oid)
            if payment is not None:  # the order's text ends with its closing brace
                text = f'{text[:-1]},"payment":{_dumps(payment)}}}'
            batch.orders.append((oid, customer_id, text, updated))
        batch.transactions += [(tx["id"], _dumps(tx)) for tx in self.transactions]
        batch.payouts += [(p["id"], _dumps(p), _ms(at)) for p, at in self.payouts]


def generate(n_orders: int, seed: int, start: int = 0) -> Batch:
    """Seed batch of ``n_orders`` orders numbered from ``start`` (for top-ups).

    Order ``start + i`` is initiated ``_STEP_SECONDS`` after the previous one, so
    the last generated order is the newest. About 40% of orders belong to guests
    (one customer each); the rest share a pool of registered customers, several
    orders each. The money is clean: every paid and completed order has a payment (embedded)
    and one payment transaction of its total; every ``SEEDED_PAYOUT_EVERY`` orders, one
    succeeded payout per currency pays out all the money available by then (allocations
    completed, items adding up to its amount, its own debit transaction).
    """
    rng = random.Random(f"{seed}:{start}")
    factory = RecordFactory(rng)
    batch = Batch()
    money = _Money(factory)
    orders: list[tuple[str, str, str, int]] = []
    pool: list[Customer] = []
    pool_size = max(1, n_orders // 6)
    statuses = rng.choices(_STATUS_NAMES, _STATUS_WEIGHTS, k=n_orders)
    for i in range(n_orders):
        initiated = _EPOCH_2026 + (start + i) * _STEP_SECONDS
        guest = rng.random() < 0.4
        if guest or (len(pool) < pool_size and (not pool or rng.random() < 0.3)):
            customer = factory.customer(guest=guest, created=initiated)
            batch.customers.append((customer.id, customer.json, _ms(initiated)))
            if not guest:
                pool.append(customer)
        else:
            customer = _pick(pool, rng)
        oid, text, currency, total, paid = factory.order(customer, initiated, statuses[i])
        # A seeded order's last change: after every moment it carries (paid, completed...).
        orders.append((oid, customer.id, text, _ms(initiated + _SETTLED_AFTER)))
        if paid is not None:
            money.paid(oid, currency, total, initiated, paid)
        if (start + i) % SEEDED_PAYOUT_EVERY == SEEDED_PAYOUT_EVERY - 1:
            money.pay_out(initiated + 90)
    money.write(batch, orders)
    return batch


def fresh_orders(n: int, now: float, rng: random.Random, status: str = "requires_payment") -> Batch:
    """New guest orders stamped at ``now`` (for inserts at the front during tests)."""
    factory = RecordFactory(rng)
    batch = Batch()
    money = _Money(factory)
    orders = []
    for _ in range(n):
        customer = factory.customer(guest=True, created=now)
        oid, text, currency, total, paid = factory.order(customer, now, status)
        batch.customers.append((customer.id, customer.json, _ms(now)))
        orders.append((oid, customer.id, text, _ms(now)))
        if paid is not None:  # a paid order inserted now is paid with a transaction too
            money.paid(oid, currency, total, now, now)
    money.write(batch, orders)
    return batch
