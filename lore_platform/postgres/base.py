"""PostgreSQL, as ``django.db.backends.postgresql``, checked for health without a query.

Django's ``CONN_HEALTH_CHECKS`` sends ``SELECT 1`` before the first query of every request
that reuses a connection: one of the few round trips a chat turn makes (issue 18). What it
finds out is whether the server closed the connection (a restart, a terminated backend, an
idle timeout), and such a connection has the server's goodbye (an error message, then
end-of-file) waiting on its socket. So at the start of a request: a connection libpq knows to be
bad, or with anything waiting to be read while idle, is closed and opened afresh (Django does
that on the next query); anything else is used. A network that silently dropped the connection
shows nothing on the socket; ``SELECT 1`` would hang on it just the same, until the TCP timeout.

After a request that raised a database error, Django's own check (``is_usable``: ``SELECT 1``)
still decides whether to keep the connection.
"""
from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    # Set by Django's base wrapper (CONN_HEALTH_CHECKS); the stubs leave them out.
    health_check_enabled: bool
    health_check_done: bool

    def close_if_health_check_failed(self) -> None:
        if self.pool or self.connection is None or not self.health_check_enabled or self.health_check_done:
            return
        if not self.idle_connection_sound():
            self.close()
        self.health_check_done = True

    def idle_connection_sound(self) -> bool:
        """Whether the open connection is one the server still holds, from libpq's status and its socket."""
        connection = self.connection
        if connection is None or connection.closed:
            return False
        pgconn = connection.pgconn
        if pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return False
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
            waiting = poller.poll(0)
        except (OSError, ValueError):
            return False
        # An idle connection is sent nothing unasked (no LISTEN here): whatever waits is the
        # server closing it, or rare enough (a notice) that a new connection costs nothing.
        return not waiting
