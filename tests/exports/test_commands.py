"""``export_orders`` and ``export_refunds``: the CSV on stdout or in a file, the flags, and the
exit status 2 of a bad flag (naming it) before anything is read or written."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command, get_commands, load_command_class
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from django_orders import exports

from .rows import order, parse, refund

pytestmark = pytest.mark.django_db


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """``manage.py <argv>`` in this process (its exit status, stdout, stderr), as from a shell:
    argparse's errors exit, a ``CommandError`` exits with its return code."""
    name = argv[0]
    command = load_command_class(get_commands()[name], name)
    try:
        command.run_from_argv(["manage.py", *argv])
        status = 0
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(autouse=True)
def keep_the_test_connection(monkeypatch):
    # run_from_argv closes every connection when the command ends, as a process would; the
    # test's transaction must outlive it.
    monkeypatch.setattr(connections, "close_all", lambda: None)


def test_orders_on_stdout():
    order("or_1", total=500, currency="jpy")
    out = io.StringIO()

    call_command("export_orders", stdout=out)

    [row] = parse(out.getvalue())
    assert (row["id"], row["total_minor"], row["total"]) == ("or_1", "500", "500")


def test_stdout_is_utf8_bytes_whatever_the_locale(capsysbinary):
    from .rows import customer

    order("or_1", buyer=customer("cu_1", name="Ọ̀ṣun 東京"))
    command = load_command_class(get_commands()["export_orders"], "export_orders")
    command.run_from_argv(["manage.py", "export_orders"])

    out = capsysbinary.readouterr().out
    assert parse(out)[0]["customer_name"] == "Ọ̀ṣun 東京"
    assert "Ọ̀ṣun 東京".encode() in out


def test_refunds_into_a_file_with_every_filter(tmp_path, capsys):
    paid = order("or_1", currency="ghs")
    usd = order("or_2", currency="usd")
    refund("rf_early", paid, hours=-1)
    refund("rf_in", paid, hours=0, reason="damaged")
    refund("rf_failed", paid, hours=1, status="failed")
    refund("rf_usd", usd, hours=1)
    refund("rf_late", paid, hours=2)
    target = tmp_path / "refunds.csv"

    status, out, err = run(
        [
            "export_refunds",
            "--since", "2026-03-01T09:30:00Z",
            "--until", "2026-03-01T11:30",
            "--status", "succeeded",
            "--status", "pending",
            "--currency", "GHS",
            "--output", str(target),
        ],
        capsys,
    )  # fmt: skip

    assert (status, err) == (0, "")
    assert out == f"Exported 1 refunds to {target}.\n"
    [row] = parse(target.read_text(encoding="utf-8"))
    assert (row["id"], row["order_id"], row["reason"]) == ("rf_in", "or_1", "damaged")
    assert list(tmp_path.iterdir()) == [target]  # no temporary file left beside it


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--since", "last tuesday"], "argument --since: expected an ISO 8601 date"),
        (["--until", "2026-02-30"], "argument --until: expected an ISO 8601 date"),
        (["--status", "payed"], "--status: no order has status 'payed'; known: canceled, "),
        (["--currency", "zzz"], "--currency: no order has currency 'zzz', and it is not one of"),
        (["--since", "2026-03-02", "--until", "2026-03-01"], "--until: must be later than since"),
        (["--output", "/nonexistent-dir/orders.csv"], "--output: cannot write '/nonexistent-dir"),
    ],
)
def test_a_bad_flag_exits_2_naming_it_and_reads_no_row(argv, named, capsys, monkeypatch, tmp_path):
    order("or_1")
    streamed = []
    monkeypatch.setattr(
        exports.ExportTable, "stream", lambda *a, **k: streamed.append(a) or iter(())
    )

    status, out, err = run(["export_orders", *argv], capsys)

    assert status == 2
    assert named in err
    assert (out, streamed) == ("", [])


def test_an_unwritable_output_fails_before_any_row_is_read(capsys, tmp_path):
    order("or_1")
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    # Unwritable even for root (the tests may run as root, where permissions do not refuse).
    for path, reason in [
        (tmp_path / "a-directory", "it is a directory"),
        (tmp_path / "a-file" / "orders.csv", "Not a directory"),
        (tmp_path / "missing" / "orders.csv", "No such file or directory"),
    ]:
        with CaptureQueriesContext(connection) as queries:
            status, out, err = run(["export_orders", "--output", str(path)], capsys)
        # (The system checks that run first may query; nothing reads the orders.)
        assert not [q for q in queries if "django_orders_order" in q["sql"]]
        assert (status, out) == (2, "")
        assert f"--output: cannot write '{path}': {reason}. Nothing was exported." in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-directory", "a-file"]


def test_a_failure_part_way_leaves_the_file_as_it_was(tmp_path, monkeypatch, capsys):
    for index in range(3):
        order(f"or_{index}", hours=index)
    target = tmp_path / "orders.csv"
    target.write_text("last month's export\n", encoding="utf-8")
    original = exports.ExportTable.stream

    def failing(self, *args, **kwargs):
        # Two rows reach the file, a row at a time, before the database goes away.
        pieces = original(self, *args, **{**kwargs, "chunk_size": 1})
        yield next(pieces)
        yield next(pieces)
        pieces.close()
        raise RuntimeError("the database went away")

    monkeypatch.setattr(exports.ExportTable, "stream", failing)

    with pytest.raises(RuntimeError, match="went away"):
        call_command("export_orders", "--output", str(target), stdout=io.StringIO())

    assert target.read_text(encoding="utf-8") == "last month's export\n"
    assert list(tmp_path.iterdir()) == [target]


def test_an_existing_file_is_replaced_once_complete(tmp_path):
    order("or_1")
    target = tmp_path / "orders.csv"
    target.write_text("old\n", encoding="utf-8")

    call_command("export_orders", "--output", str(target), stdout=io.StringIO())

    assert [row["id"] for row in parse(target.read_text(encoding="utf-8"))] == ["or_1"]


def test_the_command_is_one_query_with_known_filters(django_assert_num_queries, tmp_path):
    for index in range(4):
        order(f"or_{index}", status="paid", hours=index)
    target: Path = tmp_path / "orders.csv"

    # paid and ghs are known (the choices, the setting): no lookup, the export's one query.
    with django_assert_num_queries(1):
        call_command(
            "export_orders", "--status", "paid", "--currency", "ghs", "--output", str(target),
            stdout=io.StringIO(),
        )  # fmt: skip

    assert len(parse(target.read_text(encoding="utf-8"))) == 4


def test_help_states_defaults_and_exit_status():
    command = load_command_class(get_commands()["export_orders"], "export_orders")
    text = command.create_parser("manage.py", "export_orders").format_help()

    for words in ("(default: stdout)", "(default: every status)", "2 a bad", "initiated_at"):
        assert words in " ".join(text.split())
