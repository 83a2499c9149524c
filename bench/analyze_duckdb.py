"""The one-pass questions of `iodump analyze`, as a DuckDB user would write them in SQL over
the Parquet of `iodump convert` (bench/analyze.sh times each against iodump's answer).

    python3 bench/analyze_duckdb.py PARQUET_DIR top-files|summary|latency|timeline|seek|seq-writes
    python3 bench/analyze_duckdb.py PARQUET_DIR window-top-files FROM_NS TO_NS
    python3 bench/analyze_duckdb.py PARQUET_DIR slow-top-files
"""
import sys

import duckdb

IO = f"'{sys.argv[1]}/io.parquet'"
# window-top-files: top files among the I/Os of [FROM_NS, TO_NS) (UTC ns).
FROM_NS, TO_NS = (int(sys.argv[3]), int(sys.argv[4])) if len(sys.argv) > 4 else (0, 0)
QUERIES = {
    "window-top-files": f"""SELECT path, count(*) AS ios, sum(bytes) AS bytes,
        avg(latency_ns) / 1000 AS mean_us, quantile_cont(latency_ns, 0.99) / 1000 AS p99_us
        FROM {IO} WHERE timestamp_ns >= {FROM_NS} AND timestamp_ns < {TO_NS}
        GROUP BY path ORDER BY ios DESC LIMIT 20""",
    # slow-top-files: top files among the I/Os slower than 1 ms (`--filter 'latency > 1ms'`).
    "slow-top-files": f"""SELECT path, count(*) AS ios, sum(bytes) AS bytes,
        avg(latency_ns) / 1000 AS mean_us, quantile_cont(latency_ns, 0.99) / 1000 AS p99_us
        FROM {IO} WHERE latency_ns > 1000000
        GROUP BY path ORDER BY ios DESC LIMIT 20""",
    "top-files": f"""SELECT path, count(*) AS ios, sum(bytes) AS bytes,
        avg(latency_ns) / 1000 AS mean_us, quantile_cont(latency_ns, 0.99) / 1000 AS p99_us
        FROM {IO} GROUP BY path ORDER BY ios DESC LIMIT 20""",
    "summary": f"""SELECT count(*) AS events, (max(timestamp_ns) - min(timestamp_ns)) / 1e9 AS duration_s,
        sum(bytes) AS bytes, count(*) FILTER (WHERE op = 'read') AS reads,
        count(*) FILTER (WHERE op = 'write') AS writes,
        sum(bytes) FILTER (WHERE op = 'read') AS read_bytes,
        sum(bytes) FILTER (WHERE op = 'write') AS write_bytes,
        count(*) FILTER (WHERE error <> 0) AS errors,
        quantile_cont(latency_ns, [0.5, 0.99]) AS latency FROM {IO}""",
    "latency": f"""SELECT count(*), quantile_cont(latency_ns, [0.5, 0.9, 0.99, 0.999]), max(latency_ns),
        avg(queue_ns), avg(device_ns), quantile_cont(device_ns, 0.99) FROM {IO}""",
    "timeline": f"""SELECT time_bucket(INTERVAL 1 second, timestamp) AS t, dev, op, count(*) AS ios,
        sum(bytes) / 1e6 AS mb, quantile_cont(latency_ns, 0.99) AS p99
        FROM {IO} GROUP BY ALL ORDER BY ALL""",
    "seek": f"""WITH s AS (SELECT dev,
            sector - lag(sector + ceil(bytes / 512)) OVER (PARTITION BY dev ORDER BY timestamp_ns) AS d
            FROM {IO} WHERE bytes > 0)
        SELECT dev, count(*) AS ios, count(*) FILTER (WHERE d = 0) AS sequential,
            median(abs(d)) AS median_seek, avg(abs(d)) AS mean_seek
        FROM s GROUP BY dev ORDER BY ios DESC""",
    "seq-writes": f"""WITH w AS (SELECT path, dev, timestamp_ns, sector, bytes,
            coalesce(sector = lag(sector + bytes // 512)
                OVER (PARTITION BY dev, path ORDER BY timestamp_ns), false) AS cont
            FROM {IO} WHERE op = 'write' AND bytes > 0),
        r AS (SELECT *, sum(CASE WHEN cont THEN 0 ELSE 1 END)
            OVER (PARTITION BY dev, path ORDER BY timestamp_ns) AS run FROM w)
        SELECT path, dev, run, min(timestamp_ns) AS start, min(sector) AS first_sector,
            sum(bytes) AS length_bytes, count(*) AS ios
        FROM r GROUP BY ALL HAVING sum(bytes) >= 1048576 ORDER BY length_bytes DESC LIMIT 20""",
}
print(len(duckdb.sql(QUERIES[sys.argv[2]]).fetchall()))
