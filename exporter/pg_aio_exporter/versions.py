"""PostgreSQL versions (server_version_num) at which the views the exporter reads appear."""

from __future__ import annotations

PG10 = 100000  # backend_type in pg_stat_activity, which the sampler needs: the oldest server
PG13 = 130000  # pg_stat_statements total_exec_time (the report's workload time)
PG14 = 140000  # pg_stat_statements toplevel; pg_stat_wal
PG15 = 150000  # pg_stat_force_next_flush(): a backend's counts in pg_stat_database at once
PG16 = 160000  # pg_stat_io
PG17 = (  # pg_stat_statements shared_blk_read_time (blk_read_time before); pg_stat_checkpointer;
    170000  # pg_wait_events
)
PG18 = 180000  # asynchronous I/O: pg_aios, io workers, byte columns in pg_stat_io
# The io worker pool sizes itself between io_min_workers and io_max_workers (io_workers is
# gone); wait event class Buffer; WAIT_FOR_WAL_* events moved from Client to IPC.
PG19 = 190000
