"""How many records the mirror holds exactly as they were sent: one statement, counts only.

In a re-sync nearly every page is unchanged: the database compares each record's
``wire_fingerprint`` with the stored one by primary key, so a page of unchanged orders costs one
statement and a short count costs one more, never a wrong answer. Why: docs/architecture/sync.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections, models, router, transaction

from .upsert import column_of, json_text

#: What ``count_matches`` counts: the ``(id, wire fingerprint)`` pairs of ``model`` stored as
#: given.
WireRead = tuple[type[models.Model], Sequence[tuple[str, str]]]

_WIRE = "wire_fingerprint"


def count_matches(*reads: WireRead) -> list[int]:
    """For each read, how many of its pairs the mirror holds: a row with that primary key and
    that non-empty wire fingerprint. One statement for all of them (none if all are empty).

    Ids must be distinct within a read (the callers deduplicate), or a row counts twice.
    """
    counts = [0 for _ in reads]
    wanted = [(n, model, pairs) for n, (model, pairs) in enumerate(reads) if pairs]
    if not wanted:
        return counts
    connection = connections[router.db_for_write(wanted[0][1])]
    if connection.vendor not in ("sqlite", "postgresql"):
        for n, model, pairs in wanted:
            given = dict(pairs)
            rows = model._default_manager.using(connection.alias).filter(pk__in=list(given))
            stored = rows.values_list("pk", _WIRE)
            counts[n] = sum(1 for pk, wire in stored if wire and given.get(pk) == wire)
        return counts
    quote = connection.ops.quote_name
    selects: list[str] = []
    params: list[str] = []
    for _n, model, pairs in wanted:
        table = quote(model._meta.db_table)
        pk = quote(column_of(model, model._meta.pk.name))
        wire = quote(column_of(model, _WIRE))
        if connection.vendor == "postgresql":
            selects.append(
                "(SELECT count(*) FROM ROWS FROM (json_array_elements_text(%s::json), "  # noqa: S608
                "json_array_elements_text(%s::json)) AS p(id, wire) CROSS JOIN LATERAL "
                f"(SELECT 1 FROM {table} AS r WHERE r.{pk} = p.id AND r.{wire} = p.wire "
                "AND p.wire <> '' LIMIT 1) AS s)"
            )
            params += [json_text([pk_ for pk_, _ in pairs]), json_text([w for _, w in pairs])]
        else:
            selects.append(
                f"(SELECT count(*) FROM json_each(%s) AS p WHERE EXISTS (SELECT 1 FROM "  # noqa: S608
                f"{table} AS r WHERE r.{pk} = json_extract(p.value, '$[0]') "
                f"AND r.{wire} = json_extract(p.value, '$[1]') AND r.{wire} <> ''))"
            )
            params.append(json_text(pairs))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(selects)}", params)
        row = cursor.fetchone()
    for (n, _model, _pairs), count in zip(wanted, row, strict=True):
        counts[n] = count
    return counts


def store_wire_fingerprints(model: type[models.Model], rows: Sequence[tuple[str, str, str]]) -> int:
    """Set the wire fingerprint of each ``(id, fingerprint, wire fingerprint)`` row whose stored
    fingerprint is still the one given; return how many rows were updated.

    For a record that came in other bytes than the stored ones but is the same record (the
    fingerprints agree): recording its new bytes' hash lets the next re-sync compare it in the
    database again, instead of reading and comparing its page every time after the service
    changed how it writes its JSON. Nothing else of the row changes (not ``changed_at``: the
    record did not change). The condition on the fingerprint keeps a row's two hashes about
    the same record even if another writer (a lookup) changed it meanwhile. One statement
    text, run once per row (``executemany``), in one transaction.
    """
    if not rows:
        return 0
    connection = connections[router.db_for_write(model)]
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    pk = quote(column_of(model, model._meta.pk.name))
    fingerprint = quote(column_of(model, "fingerprint"))
    wire = quote(column_of(model, _WIRE))
    sql = f"UPDATE {table} SET {wire} = %s WHERE {pk} = %s AND {fingerprint} = %s"  # noqa: S608
    # In the caller's transaction if there is one (a page's), else in one of its own.
    with transaction.atomic(using=connection.alias, savepoint=False), connection.cursor() as cursor:
        cursor.executemany(sql, [(new, pk_, print_) for pk_, print_, new in rows])
        updated = cursor.rowcount
    return updated
