"""The queries both backends share, written once in the SQL SQLite and PostgreSQL both
speak; a backend supplies its connections (``_transaction``, ``_rows``), its
placeholder style, its row-order column and its byte-size expression.

Statements are written with ``?`` placeholders; PostgreSQL's backend turns them into
``%s`` (no statement here has a literal ``?`` or ``%``).
"""

from __future__ import annotations

import builtins
import json
from abc import abstractmethod
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from reef_cli.core.records import (
    HARVEST_COLUMNS,
    RECORD_COLUMNS,
    HarvestedSession,
    Record,
    RecordNotFound,
    harvest_from_row,
    harvest_values,
    record_from_row,
    record_values,
    state_rank,
    where_clause,
)
from reef_cli.core.store.base import Evicted, ReportRow, ScenarioSize, Store

Row = Mapping[str, Any]
PAGE = 500  # rows per page when iterating, ids per IN (...) list
CHUNK = 200  # rows per INSERT: 200 x 25 values, well under either database's limit


class Tx(Protocol):
    """One open transaction."""

    def run(self, sql: str, args: Sequence[Any] = ()) -> int:
        """Execute; the number of rows it changed."""

    def rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]: ...

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...


def _rank(table: str) -> str:
    return f"CASE {table}.state WHEN 'complete' THEN 2 WHEN 'interrupted' THEN 1 ELSE 0 END"


_ROW_MARKS = "(" + ",".join("?" * len(RECORD_COLUMNS)) + ")"
_ON_CONFLICT = (
    " ON CONFLICT (id) DO UPDATE SET "
    + ",".join(f"{c} = excluded.{c}" for c in RECORD_COLUMNS if c != "id")
    + f" WHERE excluded.state != 'streaming' AND {_rank('excluded')} >= {_rank('records')}"
)


_UPSERTS: dict[int, str] = {}


def upsert_sql(rows: int) -> str:
    """``INSERT … VALUES (…),(…) ON CONFLICT …`` for ``rows`` rows (cached)."""
    sql = _UPSERTS.get(rows)
    if sql is None:
        sql = _UPSERTS[rows] = (
            f"INSERT INTO records ({','.join(RECORD_COLUMNS)}) VALUES "
            + ",".join([_ROW_MARKS] * rows)
            + _ON_CONFLICT
        )
    return sql


def collapse(records: Sequence[Record]) -> builtins.list[Record]:
    """One row per id, the one a sequence of upserts would leave: a later row replaces an
    earlier one unless it would move it back. (PostgreSQL refuses a statement that
    updates one row twice; a stream's ``streaming`` row and its final row can share a
    batch.)"""
    kept: dict[str, Record] = {}
    for rec in records:
        current = kept.get(rec.id)
        if current is None or (
            rec.state != "streaming" and state_rank(rec.state) >= state_rank(current.state)
        ):
            kept[rec.id] = rec
    return builtins.list(kept.values())


def _ids(values: Sequence[str]) -> Iterator[builtins.list[str]]:
    unique = builtins.list(dict.fromkeys(values))
    for start in range(0, len(unique), PAGE):
        yield unique[start : start + PAGE]


def json_path(key: str) -> str:
    """SQLite's JSON path to an object's member ``key`` (quoted: a tag name may hold
    ``-``, which a bare path reads as an operator)."""
    return '$."' + key.replace('"', '""') + '"'


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _report_from_row(row: Row) -> ReportRow:
    return ReportRow(
        id=row["id"],
        scenario=row["scenario"],
        score=row["score"],
        feedback=json.loads(row["feedback"]) if row["feedback"] else None,
        references=json.loads(row["refs"]),
        metadata=json.loads(row["metadata"]) if row["metadata"] else None,
        content_hash=row["content_hash"],
        created_at=row["created_at"],
    )


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


class SQLStore(Store):
    """:class:`Store` over a SQL database; see the module docstring."""

    ORDER: str  # the column that orders rows inserted in the same microsecond

    @abstractmethod
    def _tag_equals(self, name: str, value: str) -> tuple[str, builtins.list[Any]]:
        """A WHERE clause on ``records r``: its tag ``name`` is ``value``."""

    SIZE: str  # bytes of a row's stored request + response (over table alias ``r``)

    @abstractmethod
    def _transaction(self) -> AbstractContextManager[Tx]: ...

    @abstractmethod
    def _rows(self, sql: str, args: Sequence[Any] = ()) -> builtins.list[Row]: ...

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    # ------------------------------------------------------------ records

    def insert_many(self, records: Sequence[Record]) -> None:
        if not records:
            return
        rows = [record_values(r) for r in collapse(records)]
        with self._transaction() as tx:
            # One multi-row statement per chunk rather than executemany: fewer round
            # trips, and for SQLite fewer GIL hand-overs (docs/performance.md).
            for start in range(0, len(rows), CHUNK):
                chunk = rows[start : start + CHUNK]
                tx.run(upsert_sql(len(chunk)), [v for row in chunk for v in row])

    def _column_of(self, column: str, record_ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for chunk in _ids(record_ids):
            for row in self._rows(
                f"SELECT id, {column} FROM records WHERE id IN ({_marks(len(chunk))})", chunk
            ):
                out[row["id"]] = row[column]
        return out

    def states(self, record_ids: Sequence[str]) -> dict[str, str]:
        return self._column_of("state", record_ids)

    def exists(self, record_ids: Sequence[str]) -> dict[str, str]:
        return self._column_of("scenario", record_ids)

    def get(self, record_id: str) -> Record:
        row = self._one("SELECT * FROM records WHERE id = ?", (record_id,))
        if row is None:
            raise RecordNotFound(
                f"no record with receipt {record_id!r}", "list receipts with `reef records list`"
            )
        return record_from_row(row)

    def _pages(
        self,
        columns: str,
        clauses: Sequence[str],
        args: Sequence[Any],
        *,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> Iterator[Row]:
        """Rows of ``records r`` matching ``clauses`` in ``created_at`` order (ties in
        insertion order), read a page at a time by key, not by offset: a page costs the
        same however deep it is, and rows deleted behind the reader shift nothing."""
        order, after = ("DESC", "<") if newest_first else ("ASC", ">")
        key: tuple[Any, Any] | None = None
        left = limit
        while left is None or left > 0:
            page = PAGE if left is None else min(PAGE, left)
            where, page_args = builtins.list(clauses), builtins.list(args)
            if key is not None:
                where.append(
                    f"(r.created_at {after} ? OR (r.created_at = ? AND r.{self.ORDER} {after} ?))"
                )
                page_args += [key[0], key[0], key[1]]
            sql = (
                f"SELECT {columns}, r.created_at AS created_at_, r.{self.ORDER} AS ord_ "
                "FROM records r"
            )
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += f" ORDER BY r.created_at {order}, r.{self.ORDER} {order} LIMIT ?"
            rows = self._rows(sql, [*page_args, page])
            yield from rows
            if len(rows) < page:
                return
            key = (rows[-1]["created_at_"], rows[-1]["ord_"])
            if left is not None:
                left -= len(rows)

    def iter(
        self,
        *,
        scenario: str | None = None,
        session_id: str | None = None,
        since: str | None = None,
        limit: int | None = None,
        oldest_first: bool = True,
        tags: Mapping[str, str] | None = None,
    ) -> Iterator[Record]:
        where, args = _filters(scenario=scenario, session_id=session_id, since=since)
        clauses = [where.removeprefix("WHERE ")] if where else []
        for name, value in (tags or {}).items():
            clause, tag_args = self._tag_equals(name, value)
            clauses.append(clause)
            args = [*args, *tag_args]
        rows = self._pages("r.*", clauses, args, newest_first=not oldest_first, limit=limit)
        return (record_from_row(row) for row in rows)

    def count(self, scenario: str | None = None) -> int:
        where, args = _filters(scenario=scenario)
        row = self._one(f"SELECT COUNT(*) AS n FROM records {where}", args)
        return int(row["n"]) if row else 0

    _SESSION_COLUMNS = """session_id, scenario, COUNT(*) AS records,
        MIN(created_at) AS started_at, MAX(created_at) AS last_at,
        CAST(SUM(COALESCE(input_tokens, 0)) AS BIGINT) AS input_tokens,
        CAST(SUM(COALESCE(output_tokens, 0)) AS BIGINT) AS output_tokens"""

    def sessions(
        self, *, scenario: str | None = None, limit: int = 50
    ) -> builtins.list[dict[str, Any]]:
        where, args = _filters(scenario=scenario)
        where = (where + " AND" if where else "WHERE") + " session_id IS NOT NULL"
        rows = self._rows(
            f"SELECT {self._SESSION_COLUMNS} FROM records {where} "
            "GROUP BY session_id, scenario ORDER BY last_at DESC LIMIT ?",
            [*args, limit],
        )
        return [dict(r) for r in rows]

    def sessions_by_id(self, session_ids: Sequence[str]) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = []
        for chunk in _ids(session_ids):
            rows = self._rows(
                f"SELECT {self._SESSION_COLUMNS} FROM records "
                f"WHERE session_id IN ({_marks(len(chunk))}) GROUP BY session_id, scenario",
                chunk,
            )
            out.extend(dict(r) for r in rows)
        return out

    # ------------------------------------------------------------ harvested sessions

    def upsert_harvested(self, sessions: Sequence[HarvestedSession]) -> int:
        if not sessions:
            return 0
        rows = [harvest_values(s) for s in sessions]  # encode before writing anything
        cols = ",".join(HARVEST_COLUMNS)
        updates = ",".join(
            f"{c} = excluded.{c}" for c in HARVEST_COLUMNS if c not in ("agent", "session_id")
        )
        with self._transaction() as tx:
            tx.many(
                f"INSERT INTO harvested_sessions ({cols}) VALUES ({_marks(len(HARVEST_COLUMNS))}) "
                f"ON CONFLICT (agent, session_id) DO UPDATE SET {updates}",
                rows,
            )
        return len(rows)

    def harvested(
        self,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        limit: int | None = None,
    ) -> builtins.list[HarvestedSession]:
        where, args = where_clause(
            ("agent = ?", agent), ("(session_id = ? OR record_session_id = ?)", session_id)
        )
        sql = (
            f"SELECT * FROM harvested_sessions {where} "
            f"ORDER BY COALESCE(ended_at, started_at, harvested_at) DESC, {self.ORDER} DESC"
        )
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [harvest_from_row(r) for r in self._rows(sql, args)]

    # ------------------------------------------------------------ reports

    def put_report(self, row: ReportRow) -> tuple[ReportRow, bool]:
        with self._transaction() as tx:
            created = tx.run(
                "INSERT INTO reports (id, scenario, score, feedback, refs, metadata, "
                "content_hash, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (
                    row.id,
                    row.scenario,
                    row.score,
                    _dump(row.feedback),
                    json.dumps(row.references),
                    _dump(row.metadata),
                    row.content_hash,
                    row.created_at,
                ),
            )
            if not created:
                existing = tx.rows("SELECT * FROM reports WHERE id = ?", (row.id,))
                return _report_from_row(existing[0]), False
            tx.many(
                "INSERT INTO report_refs (report_id, record_id) VALUES (?, ?)",
                [(row.id, r) for r in row.references],
            )
        return row, True

    def reports(
        self, *, scenario: str | None = None, record_id: str | None = None
    ) -> builtins.list[ReportRow]:
        where, args = where_clause(
            ("scenario = ?", scenario),
            ("id IN (SELECT report_id FROM report_refs WHERE record_id = ?)", record_id),
        )
        sql = f"SELECT * FROM reports {where} ORDER BY created_at, id"
        return [_report_from_row(r) for r in self._rows(sql, args)]

    def report_count(self, scenario: str | None = None) -> int:
        where, args = where_clause(("scenario = ?", scenario))
        row = self._one(f"SELECT COUNT(*) AS n FROM reports {where}", args)
        return int(row["n"]) if row else 0

    # ------------------------------------------------------------ the live loop's queries

    def probe(self, scenario: str) -> builtins.list[Any]:
        records = self._one(
            "SELECT MAX(created_at) AS newest FROM records WHERE scenario = ?", (scenario,)
        )
        reports = self._one(
            "SELECT MAX(created_at) AS newest FROM reports WHERE scenario = ?", (scenario,)
        )
        harvested = self._one(
            "SELECT COUNT(*) AS n, MAX(harvested_at) AS newest FROM harvested_sessions"
        )
        assert records is not None and reports is not None and harvested is not None
        return [
            records["newest"],
            reports["newest"],
            [int(harvested["n"]), harvested["newest"]],
        ]

    def has_records(self, scenario: str) -> bool:
        return (
            self._one("SELECT 1 AS one FROM records WHERE scenario = ? LIMIT 1", (scenario,))
            is not None
        )

    def records_at_most(self, scenario: str, limit: int) -> int:
        row = self._one(
            "SELECT COUNT(*) AS n FROM "
            "(SELECT 1 AS one FROM records WHERE scenario = ? LIMIT ?) AS s",
            (scenario, limit + 1),
        )
        return int(row["n"]) if row else 0

    def scored_sessions(self, scenario: str) -> int:
        row = self._one(
            """SELECT COUNT(DISTINCT CASE WHEN r.session_id IS NOT NULL
                                          THEN 's:' || r.session_id ELSE 'r:' || r.id END) AS n
               FROM reports p
               JOIN report_refs rr ON rr.report_id = p.id
               JOIN records r ON r.id = rr.record_id
               WHERE p.scenario = ? AND p.score IS NOT NULL
                 AND r.scenario = ? AND r.state != 'streaming'""",
            (scenario, scenario),
        )
        return int(row["n"] or 0) if row else 0

    def session_scores(self, scenario: str, *, limit: int) -> builtins.list[dict[str, Any]]:
        rows = self._rows(
            """SELECT skey, MIN(at) AS first_at, AVG(score) AS score, COUNT(*) AS reports
               FROM (SELECT DISTINCT
                       CASE WHEN r.session_id IS NOT NULL THEN 'session:' || r.session_id
                            ELSE 'record:' || r.id END AS skey,
                       p.id AS report_id, p.score AS score,
                       CASE WHEN r.session_id IS NULL THEN r.created_at
                            ELSE (SELECT MIN(o.created_at) FROM records o
                                  WHERE o.session_id = r.session_id AND o.scenario = r.scenario
                                    AND o.state != 'streaming') END AS at
                     FROM reports p
                     JOIN report_refs rr ON rr.report_id = p.id
                     JOIN records r ON r.id = rr.record_id
                     WHERE p.scenario = ? AND p.score IS NOT NULL
                       AND r.scenario = ? AND r.state != 'streaming') scored
               GROUP BY skey ORDER BY first_at DESC, skey DESC LIMIT ?""",
            (scenario, scenario, limit),
        )
        out = [
            {
                "session": row["skey"],
                "first_at": row["first_at"],
                "score": float(row["score"]),
                "reports": int(row["reports"]),
            }
            for row in rows
        ]
        return out[::-1]

    def release_scores(self, scenario: str) -> builtins.list[dict[str, Any]]:
        counted = self._rows(
            """SELECT release_id, COUNT(*) AS records FROM records
               WHERE scenario = ? AND state != 'streaming'
               GROUP BY release_id""",
            (scenario,),
        )
        scored = self._rows(
            """SELECT release_id, COUNT(*) AS reports, AVG(score) AS score
               FROM (SELECT DISTINCT r.release_id AS release_id, p.id AS report_id,
                            p.score AS score
                     FROM reports p
                     JOIN report_refs rr ON rr.report_id = p.id
                     JOIN records r ON r.id = rr.record_id
                     WHERE p.scenario = ? AND p.score IS NOT NULL
                       AND r.scenario = ? AND r.state != 'streaming') credited
               GROUP BY release_id""",
            (scenario, scenario),
        )
        out: dict[Any, dict[str, Any]] = {
            row["release_id"]: {
                "release": row["release_id"],
                "records": int(row["records"]),
                "reports": 0,
                "score": None,
            }
            for row in counted
        }
        for row in scored:
            entry = out.setdefault(
                row["release_id"],
                {"release": row["release_id"], "records": 0, "reports": 0, "score": None},
            )
            entry["reports"], entry["score"] = int(row["reports"]), float(row["score"])
        return sorted(out.values(), key=lambda e: (e["release"] is None, e["release"] or 0))

    # ------------------------------------------------------------ retention

    def sizes(self) -> builtins.list[ScenarioSize]:
        rows = self._rows(
            f"""SELECT scenario, COUNT(*) AS records,
                       CAST(COALESCE(SUM({self.SIZE}), 0) AS BIGINT) AS bytes,
                       MIN(created_at) AS oldest, MAX(created_at) AS newest,
                       CAST(SUM(CASE WHEN EXISTS (SELECT 1 FROM report_refs rr
                                                  WHERE rr.record_id = r.id)
                                THEN 1 ELSE 0 END) AS BIGINT) AS referenced
                FROM records r GROUP BY scenario ORDER BY scenario"""
        )
        return [
            ScenarioSize(
                scenario=row["scenario"],
                records=int(row["records"]),
                bytes=int(row["bytes"]),
                oldest=row["oldest"],
                newest=row["newest"],
                referenced=int(row["referenced"] or 0),
            )
            for row in rows
        ]

    def _evictable(
        self, before: str | None, protected: Collection[str]
    ) -> Iterator[tuple[str, int]]:
        """(id, bytes) of the records eviction may take, oldest first, a page at a time."""
        clauses = [
            "r.state != 'streaming'",
            "NOT EXISTS (SELECT 1 FROM report_refs rr WHERE rr.record_id = r.id)",
        ]
        args: builtins.list[Any] = []
        if before is not None:
            clauses.append("r.created_at < ?")
            args.append(before)
        for row in self._pages(f"r.id AS id, {self.SIZE} AS size", clauses, args):
            if row["id"] not in protected:
                yield row["id"], int(row["size"] or 0)

    def _delete_oldest(
        self, candidates: Iterator[tuple[str, int]], at_least: int | None = None
    ) -> Evicted:
        """Delete ``candidates`` a page per transaction: all of them, or (``at_least``)
        only until that many bytes went."""
        count = size = 0
        batch: builtins.list[str] = []
        for rid, nbytes in candidates:
            if at_least is not None and size >= at_least:
                break
            batch.append(rid)
            count, size = count + 1, size + nbytes
            if len(batch) >= PAGE:
                self._delete(batch)
                batch = []
        self._delete(batch)
        return Evicted(count, size)

    def _delete(self, ids: Sequence[str]) -> None:
        with self._transaction() as tx:
            for chunk in _ids(ids):
                tx.run(f"DELETE FROM records WHERE id IN ({_marks(len(chunk))})", chunk)

    def evict(
        self,
        *,
        before: str | None = None,
        max_bytes: int | None = None,
        protected: Collection[str] = (),
    ) -> Evicted:
        protected = set(protected)
        old = Evicted(0, 0)
        if before is not None:
            old = self._delete_oldest(self._evictable(before, protected))
        over = Evicted(0, 0)
        if max_bytes is not None:
            row = self._one(
                f"SELECT CAST(COALESCE(SUM({self.SIZE}), 0) AS BIGINT) AS b FROM records r"
            )
            excess = (int(row["b"]) if row else 0) - max_bytes
            if excess > 0:
                over = self._delete_oldest(self._evictable(None, protected), at_least=excess)
        return Evicted(old.records + over.records, old.bytes + over.bytes)


def _filters(
    *, scenario: str | None = None, session_id: str | None = None, since: str | None = None
) -> tuple[str, builtins.list[Any]]:
    return where_clause(
        ("scenario = ?", scenario), ("session_id = ?", session_id), ("created_at >= ?", since)
    )
