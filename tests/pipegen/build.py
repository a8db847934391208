"""A pipeline as PySpark: the streaming query, and its stateless part (sources, filters, renames, the
static join) as a batch query over the same files, by which Spark itself tells which records reach
the first stateful operator and in which group. ``Query.code`` is the query as the code that built
it, printed with a mismatch to replay it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipegen.spec import Pipeline, Source


@dataclass
class Query:
    df: Any
    code: list[str] = field(default_factory=list)

    def text(self) -> str:
        return "\n".join(self.code)


WRITTEN = "inputs_as_written"  # with cleanSource: a copy of every input file as written, for the truth


def read(spark: Any, src: Source, folder: Path, streaming: bool, per_trigger: int = 1, archive: Path | None = None) -> Any:
    r = (spark.readStream.option("maxFilesPerTrigger", per_trigger) if streaming else spark.read).schema(src.ddl())
    if archive is not None:
        r = r.option("cleanSource", "archive").option("sourceArchiveDir", str(archive))
    if src.fmt == "csv":
        return r.option("header", "true").csv(str(folder))
    return r.parquet(str(folder)) if src.fmt == "parquet" else r.json(str(folder))


def read_static(spark: Any, p: Pipeline, root: Path) -> Any:
    assert p.static is not None
    r = spark.read.schema(f"{p.static.lookup} STRING, {p.static.produces} STRING")
    path = str(root / "inputs" / p.static.name)
    if p.static.fmt == "csv":
        return r.option("header", "true").csv(path)
    return r.parquet(path) if p.static.fmt == "parquet" else r.json(path)


def group_column(p: Pipeline) -> str:
    """The column the last operator groups by (the key a user asks for by default)."""
    if p.join:
        return p.join.get("by") or p.sources[0].cols["key"]
    return p.static.produces if p.static and p.static.adds else p.col("key")


def prefix(
    spark: Any, p: Pipeline, root: Path, streaming: bool, code: list[str], filters: bool = True, static: bool = True
) -> dict[str, Any]:
    """The stateless part: per side ("" without a join) the rows that reach the first stateful operator
    (``filters``, ``static``: without the filters, or the static join, to tell which one dropped a record)."""
    from pyspark.sql.functions import col, expr

    out: dict[str, Any] = {}
    frames = {}
    for s in p.sources:
        n = p.files_per_batch
        if streaming:
            df = read(spark, s, root / "inputs" / s.name, True, n, archive=root / "archive" if p.clean_source else None)
        else:  # the truth reads the files as they were written (with cleanSource, Spark moved those it read)
            df = read(spark, s, root / (WRITTEN if p.clean_source else "inputs") / s.name, False, n)
        archive = ".option('cleanSource', 'archive').option('sourceArchiveDir', 'archive')" if p.clean_source else ""
        code.append(
            f"{s.name} = spark.readStream.schema({s.ddl()!r}).option('maxFilesPerTrigger', {n}){archive}"
            f".{s.fmt}('inputs/{s.name}')"
        )
        if s.time_unit:  # the event time the query makes of a number since the epoch
            df = df.withColumn(s.cols["time"], expr(s.event_time()))
            code.append(f"{s.name} = {s.name}.withColumn({s.cols['time']!r}, expr({s.event_time()!r}))")
        if streaming:
            df = df.withWatermark(s.cols["time"], f"{s.delay} minutes")
            code.append(f"{s.name} = {s.name}.withWatermark({s.cols['time']!r}, '{s.delay} minutes')")
        for f in p.filters if filters else []:
            if f.source == s.name:
                df = df.where(expr(f.expr))
                code.append(f"{s.name} = {s.name}.where({f.expr!r})")
        frames[s.name] = df
    if p.join:
        for s in p.sources:
            out[s.side] = frames[s.name]
        return out
    names = [s.name for s in p.sources]
    df = frames[names[0]]
    if len(names) == 2:
        df = df.unionByName(frames[names[1]])
        code.append(f"df = {names[0]}.unionByName({names[1]})")
    else:
        code.append(f"df = {names[0]}")
    common = [f for f in p.filters if not f.source] if filters else []
    if not p.rename_first:
        df = _where(df, common, code)
    df = _python(p, df, code)
    if p.rename:
        cols = p.sources[0].cols
        df = df.select(*[col(c).alias(p.rename.get(role, c)) for role, c in cols.items()])
        shown = ", ".join(f"col({c!r}).alias({p.rename[r]!r})" if r in p.rename else repr(c) for r, c in cols.items())
        code.append(f"df = df.select({shown})")
    if p.rename_first:
        df = _where(df, common, code)
    if p.static and static:
        st = p.static
        table = read_static(spark, p, root)
        shown = (
            f"{st.lookup} -> {st.produces}"
            if st.adds
            else f"the {st.lookup} values it {'keeps' if st.kind == 'left_semi' else 'drops'}"
        )
        code.append(f"{st.name} = spark.read.{st.fmt}('inputs/{st.name}')  # a static table: {shown}")
        if st.kind == "right_outer":  # the stream on the right: every stream row kept
            df = table.join(df, on=st.lookup, how=st.kind)
            code.append(f"df = {st.name}.join(df, on={st.lookup!r}, how={st.kind!r})")
        else:
            df = df.join(table, on=st.lookup, how=st.kind)
            code.append(f"df = df.join({st.name}, on={st.lookup!r}, how={st.kind!r})")
    out[""] = df
    return out


def _python(p: Pipeline, df: Any, code: list[str]) -> Any:
    """Python between the sources and the state (``Pipeline.python``): the rows as they came."""
    if p.python == "map_in_pandas":

        def as_they_came(batches: Any) -> Any:  # (local: pickled by value, for workers without this module)
            yield from batches

        code.append("df = df.mapInPandas(lambda batches: (b for b in batches), df.schema)")
        return df.mapInPandas(as_they_came, df.schema)
    if p.python == "udf":
        from pyspark.sql.functions import col, pandas_udf

        num = p.sources[0].cols["num"]
        same = pandas_udf(lambda s: s, "long")
        code.append(f"df = df.withColumn({num!r}, pandas_udf(lambda s: s, 'long')(col({num!r})))")
        return df.withColumn(num, same(col(num)))
    return df


def _where(df: Any, filters: list[Any], code: list[str]) -> Any:
    from pyspark.sql.functions import expr

    for f in filters:
        df = df.where(expr(f.expr))
        code.append(f"df = df.where({f.expr!r})")
    return df


def streaming_query(spark: Any, p: Pipeline, root: Path) -> Query:
    from pyspark.sql.functions import bit_or, coalesce, col, count, expr, session_window, when, window, window_time
    from pyspark.sql.functions import sum as sum_

    q = Query(None)
    code = q.code
    sides = prefix(spark, p, root, True, code)
    if p.join:
        left, right = p.sources
        for s in p.sources:
            if p.dedup and p.dedup["side"] == s.side:
                sides[s.side] = _dedup(p, sides[s.side], s.cols["eid"], s.cols["time"], code, s.name)
        lo, hi = p.join["lower"], p.join["upper"]
        lk, rk, lt, rt = left.cols["key"], right.cols["key"], left.cols["time"], right.cols["time"]
        low = f"l.{lt} - INTERVAL {lo} MINUTES" if lo else f"l.{lt}"
        if p.join["form"] == "between":
            cond = f"l.{lk} = r.{rk} AND r.{rt} BETWEEN {low} AND l.{lt} + INTERVAL {hi} MINUTES"
        else:
            cond = f"l.{lk} = r.{rk} AND r.{rt} >= {low} AND r.{rt} <= l.{lt} + INTERVAL {hi} MINUTES"
        jt = p.join["type"]
        joined = sides["left"].alias("l").join(sides["right"].alias("r"), expr(cond), jt)
        code.append(f"joined = {left.name}.alias('l').join({right.name}.alias('r'), expr({cond!r}), {jt!r})")
        if p.window:
            size = p.window["size"]
            by = p.join.get("by") or lk
            # a row joins every match: bit_or, not sum, keeps each record's power of two once
            df = joined.groupBy(window(col(f"l.{lt}"), f"{size} minutes"), col(f"l.{by}")).agg(
                count("*").alias("n"),
                bit_or(col(f"l.{left.cols['num']}")).alias("left_total"),
                bit_or(col(f"r.{right.cols['num']}")).alias("right_total"),
                bit_or(when(col("r.rid").isNull(), col(f"l.{left.cols['num']}"))).alias("unmatched_total"),
            )
            code.append(
                f"df = joined.groupBy(window(col('l.{lt}'), '{size} minutes'), col('l.{by}')).agg(count('*').alias('n'), "
                f"bit_or('l.{left.cols['num']}').alias('left_total'), bit_or('r.{right.cols['num']}').alias('right_total'), "
                f"bit_or(when(col('r.rid').isNull(), col('l.{left.cols['num']}'))).alias('unmatched_total'))"
            )
        elif jt == "left_semi":
            df = joined
            code.append("df = joined")
        else:
            key = coalesce(col(f"l.{lk}"), col(f"r.{rk}")) if jt in ("right_outer", "full_outer") else col(f"l.{lk}")
            df = joined.select(
                key.alias(lk),
                col("l.rid").alias(f"{left.name}_rid"),
                col("r.rid").alias(f"{right.name}_rid"),
                col(f"l.{lt}").alias(f"{left.name}_{lt}"),
                col(f"r.{rt}").alias(f"{right.name}_{rt}"),
                col(f"l.{left.cols['tag']}").alias(f"{left.name}_{left.cols['tag']}"),
                col(f"r.{right.cols['tag']}").alias(f"{right.name}_{right.cols['tag']}"),
            )
            first = f"coalesce(col('l.{lk}'), col('r.{rk}'))" if jt in ("right_outer", "full_outer") else f"col('l.{lk}')"
            code.append(
                f"df = joined.select({first}.alias({lk!r}), col('l.rid').alias('{left.name}_rid'), "
                f"col('r.rid').alias('{right.name}_rid'), col('l.{lt}').alias('{left.name}_{lt}'), "
                f"col('r.{rt}').alias('{right.name}_{rt}'), ...)"
            )
        q.df = _flatten(p, df, code)
        return q
    df = sides[""]
    s0 = p.sources[0]
    time, eid, num = s0.cols["time"], p.col("eid"), p.col("num")
    group = group_column(p)
    if p.dedup:
        df = _dedup(p, df, eid, time, code, "df")
    if p.window and not p.rollup:
        w = p.window
        if w["kind"] == "session":
            win, shown = session_window(col(time), f"{w['gap']} minutes"), f"session_window(col({time!r}), '{w['gap']} minutes')"
        elif w["kind"] == "sliding":
            win = window(col(time), f"{w['size']} minutes", f"{w['slide']} minutes")
            shown = f"window(col({time!r}), '{w['size']} minutes', '{w['slide']} minutes')"
        else:
            win, shown = window(col(time), f"{w['size']} minutes"), f"window(col({time!r}), '{w['size']} minutes')"
        df = df.groupBy(win, col(group)).agg(count("*").alias("n"), sum_(col(num)).alias("total"))
        code.append(f"df = df.groupBy({shown}, col({group!r})).agg(count('*').alias('n'), sum({num!r}).alias('total'))")
    if p.rollup:
        df = df.groupBy(window(col(time), "5 minutes"), col(group)).agg(sum_(col(num)).alias("total"), count("*").alias("n"))
        size = p.rollup["size"]
        df = df.groupBy(window(window_time(col("window")), f"{size} minutes"), col(group)).agg(
            sum_(col("total")).alias("total"), count("*").alias("windows")
        )
        code.append(
            f"df = df.groupBy(window(col({time!r}), '5 minutes'), col({group!r})).agg(sum({num!r}).alias('total'), count('*').alias('n'))"
        )
        code.append(
            f"df = df.groupBy(window(window_time(col('window')), '{size} minutes'), col({group!r})).agg(sum('total').alias('total'), count('*').alias('windows'))"
        )
    if p.function:
        df = _function(p, df, group, time, code)
    q.df = _flatten(p, df, code)
    return q


def _dedup(p: Pipeline, df: Any, eid: str, time: str, code: list[str], name: str) -> Any:
    assert p.dedup is not None
    kind = p.dedup["kind"]
    if kind == "within":
        code.append(f"{name} = {name}.dropDuplicatesWithinWatermark([{eid!r}])")
        return df.dropDuplicatesWithinWatermark([eid])
    cols = [eid, time] if kind == "with_time" else [eid]
    code.append(f"{name} = {name}.dropDuplicates({cols!r})")
    return df.dropDuplicates(cols)


def _flatten(p: Pipeline, df: Any, code: list[str]) -> Any:
    from pyspark.sql.functions import col

    struct = next((c for c in ("window", "session_window") if c in df.columns), None)
    if not p.flatten or struct is None:
        return df
    rest = [c for c in df.columns if c != struct]
    code.append(
        f"df = df.select(col('{struct}.start').alias('window_start'), col('{struct}.end').alias('window_end'), *{rest!r})"
    )
    return df.select(col(f"{struct}.start").alias("window_start"), col(f"{struct}.end").alias("window_end"), *rest)


def _function(p: Pipeline, df: Any, group: str, time: str, code: list[str]) -> Any:
    """The user's function: keeps the group's record ids and emits them once its event-time timer fires
    (``gap`` minutes after the group's newest event)."""
    assert p.function is not None
    kind, gap_ms = p.function["kind"], p.function["gap"] * 60_000
    number = p.int_keys and group == p.col("key")  # the group is the stream's key column, a number
    out = f"{group} {'BIGINT' if number else 'STRING'}, rids STRING, n LONG"
    dtype = "int64" if number else str
    if kind == "group_state":
        from pyspark.sql.streaming.state import GroupStateTimeout

        state = "rids STRING, start LONG, end LONG"  # the group's first and last event (ms): an end that is not a time
        code.append(
            f"df = df.groupBy({group!r}).applyInPandasWithState(keep_ids, {out!r}, {state!r}, 'append', "
            f"GroupStateTimeout.EventTimeTimeout)  # emits the ids {p.function['gap']} minutes after the group's last event"
        )
        return df.groupBy(group).applyInPandasWithState(
            _group_state_fn(group, time, gap_ms, dtype), out, state, "append", GroupStateTimeout.EventTimeTimeout
        )
    code.append(
        f"df = df.groupBy({group!r}).transformWithStateInPandas(KeepIds{kind[4:].title()}(), {out!r}, 'Append', 'EventTime')"
        f"  # {kind[4:]} state; an event-time timer {p.function['gap']} minutes after the group's last event"
    )
    return df.groupBy(group).transformWithStateInPandas(_processor(kind, group, time, gap_ms, dtype), out, "Append", "EventTime")


def _group_state_fn(group: str, time: str, gap_ms: int, dtype: Any = str) -> Callable[..., Any]:
    def keep_ids(key: tuple[Any, ...], pdfs: Any, state: Any) -> Any:
        import pandas as pd

        if state.hasTimedOut:
            rids = state.get[0]
            state.remove()
            yield pd.DataFrame({group: [key[0]], "rids": [rids], "n": [len(rids.split(","))]})
            return
        rids, first, last = state.get if state.exists else ("", None, 0)
        ids = [x for x in rids.split(",") if x]
        for pdf in pdfs:
            ids += [str(x) for x in pdf["rid"]]
            last = max(last, int(pd.Timestamp(pdf[time].max()).timestamp() * 1000))
            low = int(pd.Timestamp(pdf[time].min()).timestamp() * 1000)
            first = low if first is None else min(first, low)
        state.update((",".join(ids), first, last))
        state.setTimeoutTimestamp(last + gap_ms)
        yield pd.DataFrame({group: [], "rids": [], "n": []}).astype({group: dtype, "rids": str, "n": "int64"})

    return keep_ids


def _processor(kind: str, group: str, time: str, gap_ms: int, dtype: Any = str) -> Any:
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    class KeepIds(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.last = handle.getValueState("last", StructType([StructField("ms", LongType())]))
            if kind == "tws_value":
                self.ids = handle.getValueState("ids", StructType([StructField("rids", StringType())]))
            elif kind == "tws_list":
                self.ids = handle.getListState("ids", StructType([StructField("rid", StringType())]))
            else:
                self.ids = handle.getMapState(
                    "ids", StructType([StructField("rid", StringType())]), StructType([StructField("ms", LongType())])
                )

        def _all(self) -> list[str]:
            if kind == "tws_value":
                return [x for x in (self.ids.get()[0] if self.ids.exists() else "").split(",") if x]
            if kind == "tws_list":
                return [r[0] for r in self.ids.get()]
            return [k[0] for k in self.ids.keys()]  # noqa: SIM118  (a MapState, not a dict)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            last = self.last.get()[0] if self.last.exists() else 0
            ids = self._all() if kind == "tws_value" else []
            for pdf in rows:
                for rid, t in zip(pdf["rid"], pdf[time], strict=True):
                    ms = int(pd.Timestamp(t).timestamp() * 1000)
                    last = max(last, ms)
                    if kind == "tws_value":
                        ids.append(str(rid))
                    elif kind == "tws_list":
                        self.ids.appendValue((str(rid),))
                    else:
                        self.ids.updateValue((str(rid),), (ms,))
            if kind == "tws_value":
                self.ids.update((",".join(ids),))
            self.last.update((last,))
            for old in self.handle.listTimers():
                self.handle.deleteTimer(old)
            self.handle.registerTimer(last + gap_ms)
            yield pd.DataFrame({group: [], "rids": [], "n": []}).astype({group: dtype, "rids": str, "n": "int64"})

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            ids = self._all()
            self.ids.clear()
            self.last.clear()
            yield pd.DataFrame({group: [key[0]], "rids": [",".join(ids)], "n": [len(ids)]})

        def close(self) -> None:
            pass

    return KeepIds()
