"""``/page`` endpoints: defaults, bounds, the provider's page window, order, lookups."""

from __future__ import annotations

import pytest

from .conftest import error_of, named_field


@pytest.fixture
def seeded(sandbox):
    sandbox.seed(60, seed=7)
    return sandbox


def _ids(response, collection="orders"):
    assert response.status_code == 200, response.text
    return [record["id"] for record in response.json()["page"][collection]]


def test_default_page_size_is_25_and_echoes_the_request(api, seeded):
    page = api.page(page_number=1).json()["page"]
    assert page["number"] == 1
    assert page["size"] == 25
    assert len(page["orders"]) == 25


def test_missing_page_number_is_page_one(api, seeded):
    assert _ids(api.page()) == _ids(api.page(page_number=1))


def test_page_zero_is_accepted_as_page_one(api, seeded):
    response = api.page(page_number=0, page_size=5)
    assert _ids(response) == _ids(api.page(page_number=1, page_size=5))
    # The provider's orders contract answers page 0 as page 1, numbered 1.
    assert response.json()["page"]["number"] == 1


def test_newest_first_and_the_newest_is_the_last_seeded(api, seeded):
    newest_first = seeded.store.newest_order_ids(60)
    assert _ids(api.page(page_number=1, page_size=60)) == newest_first
    assert _ids(api.page(page_number=2, page_size=10)) == newest_first[10:20]


def test_walk_ends_on_a_short_last_page_and_sees_every_record_once(api, seeded):
    seen = []
    for number in range(1, 11):
        ids = _ids(api.page(page_number=number, page_size=25))
        seen += ids
        if len(ids) < 25:
            break
    assert number == 3
    assert len(ids) == 10
    assert len(seen) == len(set(seen)) == 60


def test_page_past_the_end_is_empty(api, seeded):
    assert _ids(api.page(page_number=5, page_size=25)) == []


def test_new_order_appears_at_the_front(api, seeded):
    [new_id] = seeded.store.insert_orders(1, seeded.clock.timestamp())
    assert _ids(api.page(page_size=1)) == [new_id]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 257}, "page_size"),
        ({"page_size": "25"}, "page_size"),
        ({"page_size": 2.5}, "page_size"),
        ({"page_size": True}, "page_size"),
        ({"page_number": -1}, "page_number"),
        ({"page_number": "1"}, "page_number"),
        ({"page_number": 1.0}, "page_number"),
        ({"page_number": True}, "page_number"),
        ({"page_number": None}, "page_number"),
    ],
)
def test_out_of_bounds_or_non_integer_is_400_naming_the_param(api, body, param):
    response = api.post("/orders/page", body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_request"
    assert named_field(error) == param


@pytest.mark.parametrize("size", [1, 256])
def test_page_size_bounds_are_inclusive(api, seeded, size):
    assert len(_ids(api.page(page_size=size))) == min(size, 60)


def test_page_cap_rejects_page_11_with_parameter_invalid(api, seeded):
    assert api.page(page_number=10, page_size=1).status_code == 200
    response = api.page(page_number=11, page_size=1)
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "parameter_invalid"
    assert named_field(error) == "page_number"
    assert "window" in error["message"]


@pytest.mark.parametrize(
    "path",
    ["/customers/page", "/balance_transactions/page", "/payouts/page", "/refunds/page"],
)
def test_page_cap_applies_to_every_resource(api, seeded, path):
    assert api.post(path, {"page_number": 10}).status_code == 200
    response = api.post(path, {"page_number": 11})
    assert response.status_code == 400
    assert error_of(response)["code"] == "parameter_invalid"


def test_the_window_is_lifted_and_put_back_at_run_time_from_python(api, seeded):
    assert seeded.page_cap == 10
    seeded.page_cap = None
    assert _ids(api.page(page_number=12, page_size=5)) == seeded.store.newest_order_ids(60)[55:]
    seeded.page_cap = 10
    assert api.page(page_number=11, page_size=1).status_code == 400
    with pytest.raises(ValueError, match="page_cap"):
        seeded.page_cap = 0
    assert seeded.page_cap == 10


def test_the_window_is_lifted_through_the_control_endpoint(api, seeded):
    lifted = api.control("settings", {"page_cap": None})
    assert lifted.status_code == 200 and lifted.json()["page_cap"] is None
    assert api.post("/customers/page", {"page_number": 11}).status_code == 200
    assert api.control("state").json()["page_cap"] is None
    assert api.control("settings", {"page_cap": 3}).json()["page_cap"] == 3
    assert api.page(page_number=4).status_code == 400
    refused = api.control("settings", {"page_cap": "all"})
    assert refused.status_code == 400 and named_field(error_of(refused)) == "page_cap"
    assert seeded.page_cap == 3


def test_no_cap_mode_serves_every_page(api, sandbox_no_cap):
    sandbox_no_cap.seed(30, seed=1)
    ids = []
    for number in range(1, 31):
        ids += _ids(
            api.post("/orders/page", {"page_number": number, "page_size": 1}, server=sandbox_no_cap)
        )
    assert ids == sandbox_no_cap.store.newest_order_ids(30)
    assert (
        _ids(api.post("/orders/page", {"page_number": 31, "page_size": 1}, server=sandbox_no_cap))
        == []
    )


@pytest.mark.parametrize(
    ("path", "collection", "prefix"),
    [
        ("/customers/page", "customers", "cu_"),
        ("/balance_transactions/page", "transactions", "bt_"),
    ],
)
def test_other_resources_use_their_own_collection_name(api, seeded, path, collection, prefix):
    page = api.post(path, {"page_size": 5}).json()["page"]
    assert set(page) == {"number", "size", collection}
    assert len(page[collection]) == 5
    assert all(record["id"].startswith(prefix) for record in page[collection])


def test_lookup_returns_the_order(api, seeded):
    order_id = seeded.store.newest_order_ids(30)[-1]
    response = api.post("/orders/lookup", {"order_id": order_id})
    assert response.status_code == 200
    assert response.json() == {"order": seeded.store.order(order_id)}


def test_lookup_of_unknown_order_is_404_resource_missing(api, seeded):
    response = api.post("/orders/lookup", {"order_id": "or_doesnotexist"})
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "resource_missing"
    assert named_field(error) == "order_id"


@pytest.mark.parametrize("body", [{}, {"order_id": ""}, {"order_id": 12}])
def test_lookup_without_an_id_is_400(api, body):
    response = api.post("/orders/lookup", body)
    assert response.status_code == 400
    assert named_field(error_of(response)) == "order_id"


def test_customer_lookup(api, seeded):
    customer = api.post("/customers/page", {"page_size": 1}).json()["page"]["customers"][0]
    response = api.post("/customers/lookup", {"customer_id": customer["id"]})
    assert response.json() == {"customer": customer}


# -- page.size: "echo" (the spec, default) or "count" (the provider's SDK) ------------------


def _sizes(api, server=None, **body):
    page = api.post("/orders/page", body, server=server).json()["page"]
    return page["size"], len(page["orders"])


def test_page_size_echoes_the_request_by_default(api, seeded):
    assert seeded.page_size_reading == "echo"
    assert _sizes(api, page_number=3, page_size=25) == (25, 10)  # short last page
    assert _sizes(api, page_number=4, page_size=25) == (25, 0)


def test_count_reading_answers_the_records_returned(api, sandbox_factory, tmp_path):
    server = sandbox_factory(db_path=tmp_path / "count.sqlite3", page_size_reading="count")
    server.seed(60, seed=7)
    assert _sizes(api, server, page_number=1, page_size=25) == (25, 25)
    assert _sizes(api, server, page_number=3, page_size=25) == (10, 10)
    assert _sizes(api, server, page_number=4, page_size=25) == (0, 0)
    customers = api.post("/customers/page", {"page_size": 256}, server=server).json()["page"]
    assert customers["size"] == len(customers["customers"]) < 256


def test_the_reading_switches_at_run_time_in_process_and_by_control(api, seeded):
    seeded.page_size_reading = "count"
    assert _sizes(api, page_number=3, page_size=25) == (10, 10)
    response = api.control("settings", {"page_size_reading": "echo"})
    assert response.json() == {"page_size_reading": "echo", "page_cap": 10}
    assert _sizes(api, page_number=3, page_size=25) == (25, 10)
    assert api.control("settings").json() == {"page_size_reading": "echo", "page_cap": 10}
    refused = api.control("settings", {"page_size_reading": "both"})
    assert refused.status_code == 400
    assert "page_size_reading" in error_of(refused)["message"]
    with pytest.raises(ValueError, match="page_size_reading"):
        seeded.page_size_reading = "size"
    assert seeded.page_size_reading == "echo"


def test_an_unknown_reading_is_refused_at_construction(tmp_path):
    from django_orders.testing.sandbox import SandboxServer

    with pytest.raises(ValueError, match="echo, count"):
        SandboxServer(tmp_path / "x.sqlite3", page_size_reading="sometimes")
