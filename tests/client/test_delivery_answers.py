"""decode_delivery: a send's answer read per channel, and answers that break the contract
refused with what breaks it (unit tests, no HTTP: the end-to-end ones are in tests/fulfilment)."""

from __future__ import annotations

import pytest

from django_orders.client.calls import decode_delivery
from django_orders.client.reading import Answer
from django_orders.exceptions import InvalidResponse

PATH = "/orders/send_receipt"


def answer(data) -> Answer:
    return Answer(data, 200, "req_1")


def test_channels_sent_and_failed_with_the_providers_error():
    result = decode_delivery(
        answer(
            {
                "order": {"id": "or_1"},
                "delivery": {
                    "document_kind": "receipt",
                    "document_url": "https://pay.example/receipt",
                    "sent_channels": ["email"],
                    "failed_channels": ["sms"],
                    "failures": [{"channel": "sms", "error": "sms_undeliverable: no."}],
                },
            }
        ),
        PATH,
    )

    assert result.sent_channels == ["email"]
    assert result.failures == [{"channel": "sms", "error": "sms_undeliverable: no."}]
    assert result.document_url == "https://pay.example/receipt"
    assert (result.error_code, result.error) == ("", "")


def test_nothing_delivered_carries_the_results_error():
    result = decode_delivery(
        answer(
            {
                "delivery": {"sent_channels": [], "failures": []},
                "error": {"code": "document_not_delivered", "message": "No address."},
            }
        ),
        PATH,
    )

    assert result.sent_channels == [] and result.failures == []
    assert (result.error_code, result.error) == ("document_not_delivered", "No address.")


@pytest.mark.parametrize(
    "data, why",
    [
        ({"order": {}}, "without the 'delivery' object"),
        ({"delivery": {"sent_channels": "email"}}, "sent_channels is not a list"),
        ({"delivery": {"sent_channels": [1]}}, "sent_channels is not a list"),
        ({"delivery": {"sent_channels": [], "failures": ["sms"]}}, "failures are not"),
        ({"delivery": {"sent_channels": [], "failures": [{"error": "x"}]}}, "failures are not"),
    ],
)
def test_an_answer_that_breaks_the_contract_is_refused(data, why):
    with pytest.raises(InvalidResponse, match=why) as info:
        decode_delivery(answer(data), PATH)
    assert info.value.request_id == "req_1"
    assert PATH in str(info.value)
