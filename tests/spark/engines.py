"""Reads a hive-style dataset of `iodump convert --partition-by host,date` with other engines,
each with its default settings, and prints what they found as one JSON object (tests/spark.rs
compares it with `iodump analyze` on the same traces).

    python3 engines.py DATASET QUERIES.sql

QUERIES.sql holds the README's queries (its "Many machines" section), separated by `;`. They
run unchanged in Spark (local[1], 1 GiB driver), DuckDB and DataFusion over the views `io` and
`files`, set up as the README shows. pandas and polars read the same tables with their
dataframe APIs. Timestamps come back as microseconds since the epoch, dates as YYYY-MM-DD.
"""

import datetime as dt
import json
import sys
import time

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def plain(v):
    """A value as JSON: timestamps as epoch microseconds (exact), dates as text."""
    if isinstance(v, dt.datetime):
        # Spark returns naive datetimes in the local time zone, the others aware ones.
        return (v.astimezone(dt.timezone.utc) - EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(v, dt.date):
        return v.isoformat()
    if hasattr(v, "item"):  # numpy scalars
        return v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)  # a Decimal or anything else: the test rejects it


def rows(records):
    return [{k: plain(v) for k, v in r.items()} for r in records]


def spark(ds, queries):
    from pyspark.sql import SparkSession

    # Small and local: one core, 1 GiB, no web UI, only the loopback address.
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("iodump-test")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # As in the README.
        for t in ["io", "files"]:
            spark.read.parquet(f"{ds}/{t}").createOrReplaceTempView(t)
        schema = {
            t: {f.name: f.dataType.simpleString() for f in spark.table(t).schema.fields}
            for t in ["io", "files"]
        }
        results = [rows(r.asDict() for r in spark.sql(q).collect()) for q in queries]
        return {"schema": schema, "results": results, "version": spark.version}
    finally:
        spark.stop()


def duckdb_(ds, queries):
    import duckdb

    con = duckdb.connect()
    # As in the README.
    for t in ["io", "files"]:
        con.sql(
            f"CREATE VIEW {t} AS SELECT * FROM "
            f"read_parquet('{ds}/{t}/**/*.parquet', hive_partitioning = true)"
        )
    schema = {
        t: {r[0]: r[1] for r in con.sql(f"DESCRIBE {t}").fetchall()} for t in ["io", "files"]
    }
    results = []
    for q in queries:
        rel = con.sql(q)
        results.append(rows(dict(zip(rel.columns, r)) for r in rel.fetchall()))
    return {"schema": schema, "results": results, "version": duckdb.__version__}


def datafusion_(ds, queries):
    import datafusion

    ctx = datafusion.SessionContext()
    for t in ["io", "files"]:
        ctx.sql(f"CREATE EXTERNAL TABLE {t} STORED AS PARQUET LOCATION '{ds}/{t}/'").collect()
    schema = {t: {f.name: str(f.type) for f in ctx.table(t).schema()} for t in ["io", "files"]}
    results = [rows(ctx.sql(q).to_pylist()) for q in queries]
    return {"schema": schema, "results": results, "version": datafusion.__version__}


def frame_summary(io):
    """Row counts per (host, date) and the first and last I/O, from a pandas frame."""
    counts = io.groupby(["host", "date"], observed=True).size().reset_index(name="ios")
    counts = counts.astype({"host": str, "date": str}).sort_values(["host", "date"])
    return {
        "per_partition": rows(counts.to_dict("records")),
        "p99_us": float(io["latency_ns"].quantile(0.99, interpolation="linear")) / 1e3,
        "first": plain(io["timestamp"].min().to_pydatetime()),
        "last_ns": int(io["timestamp_ns"].max()),
    }


def pandas_(ds):
    import pandas as pd

    io = pd.read_parquet(f"{ds}/io")
    schema = {"io": {c: str(t) for c, t in io.dtypes.items()}}
    return {"schema": schema, **frame_summary(io), "version": pd.__version__}


def polars_(ds):
    import polars as pl

    io = pl.scan_parquet(f"{ds}/io/**/*.parquet", hive_partitioning=True)
    schema = {"io": {c: str(t) for c, t in io.collect_schema().items()}}
    counts = (
        io.group_by("host", "date").agg(pl.len().alias("ios")).sort("host", "date").collect()
    )
    one = io.select(
        (pl.col("latency_ns").quantile(0.99, interpolation="linear") / 1e3).alias("p99_us"),
        pl.col("timestamp").min().alias("first"),
        pl.col("timestamp_ns").max().alias("last_ns"),
    ).collect()
    return {
        "schema": schema,
        "per_partition": rows(counts.to_dicts()),
        **rows(one.to_dicts())[0],
        "version": pl.__version__,
    }


def main():
    ds, qfile = sys.argv[1], sys.argv[2]
    text = open(qfile).read()
    queries = [q.strip() for q in text.split(";") if q.strip()]
    out = {"engines": {}, "frames": {}, "seconds": {}}
    for name, run in [("duckdb", duckdb_), ("datafusion", datafusion_), ("spark", spark)]:
        t = time.monotonic()
        out["engines"][name] = run(ds, queries)
        out["seconds"][name] = round(time.monotonic() - t, 2)
    for name, run in [("pandas", pandas_), ("polars", polars_)]:
        t = time.monotonic()
        out["frames"][name] = run(ds)
        out["seconds"][name] = round(time.monotonic() - t, 2)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
