"""The database the black-box suites run revopsd on.

REVOPS_TEST_BACKEND picks it: `sqlite` (the default: the embedded file in
the server's data directory) or `postgres`. On postgres, ctest's fixture
(t/CMakeLists.txt) starts one throw-away cluster for the whole run with
scripts/pg-test-cluster.sh and writes "URL DIR" to the file named by
REVOPS_TEST_PG_FILE; every `Database` is then a fresh database of its own
in that cluster, dropped by `drop()`.

A suite that looks into the database itself (to plant a row an older
version would have written, or to prove the database refuses a change)
does it through `Database.run`, which speaks the backend's own client
(`sqlite3` or `psql`), so the same test runs on both.
"""

import glob
import itertools
import os
import subprocess

NAME = os.environ.get("REVOPS_TEST_BACKEND", "sqlite")
if NAME not in ("sqlite", "postgres"):
    raise RuntimeError("REVOPS_TEST_BACKEND must be sqlite or postgres, not %r" % NAME)
POSTGRES = NAME == "postgres"

_seq = itertools.count(1)


def _pg_bin(name):
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/" + name))
    if not found:
        raise RuntimeError("no PostgreSQL %s found under /usr/lib/postgresql" % name)
    return found[-1]


def cluster_url(db="postgres"):
    """The URL of database db in the fixture's cluster. Through the
    cluster's Unix socket, which a suite that runs in a network namespace of
    its own (test_webhook_rebinding) reaches as well as any other."""
    path = os.environ.get("REVOPS_TEST_PG_FILE")
    if not path:
        raise RuntimeError("REVOPS_TEST_BACKEND=postgres needs REVOPS_TEST_PG_FILE "
                           "(ctest's pg_cluster fixture sets it)")
    with open(path) as f:
        url, sockdir = f.read().split()
    port = url.rsplit(":", 1)[1].split("/")[0]
    return "postgres://revops@/%s?host=%s&port=%s" % (db, sockdir, port)


def psql(url, sql, check=False, timeout=60):
    """Runs sql with psql on url; unaligned, tuples only, stops at the first
    error. Returns the CompletedProcess (text)."""
    return subprocess.run([_pg_bin("psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
                           "-d", url, "-c", sql], capture_output=True, text=True,
                          timeout=timeout, check=check)


def quote(text):
    """text as an SQL string literal (the same on both backends)."""
    return "'" + text.replace("'", "''") + "'"


class Database:
    """The database of one revopsd (and of revopsctl beside it)."""

    def __init__(self, data_dir):
        self.data_dir = data_dir
        if POSTGRES:
            base = cluster_url()
            self.name = "t%d_%d" % (os.getpid(), next(_seq))
            psql(base, "CREATE DATABASE %s" % self.name, check=True)
            self.url = cluster_url(self.name)
        else:
            self.name = None
            self.url = "sqlite:" + os.path.join(data_dir, "revops.db")

    def args(self):
        """The command-line options that name this database (none for
        SQLite: the servers under test find it in --data-dir, as a user's
        do)."""
        return ["--database", self.url] if POSTGRES else []

    def run(self, sql, timeout=60):
        """Runs sql (one or more statements) with the backend's own client;
        returns the CompletedProcess (text; rows as `a|b` lines)."""
        if POSTGRES:
            return psql(self.url, sql, timeout=timeout)
        return subprocess.run(["sqlite3", "-bail", "-cmd", ".timeout 30000",
                               self.url[len("sqlite:"):], sql],
                              capture_output=True, text=True, timeout=timeout)

    def rows(self, sql):
        """The rows of a query, each a list of text fields."""
        p = self.run(sql)
        if p.returncode != 0:
            raise AssertionError("%s failed: %s" % (sql, p.stderr))
        return [line.split("|") for line in p.stdout.splitlines() if line]

    def value(self, sql):
        """The text a one-value query prints (a JSON column stays whole)."""
        p = self.run(sql)
        if p.returncode != 0:
            raise AssertionError("%s failed: %s" % (sql, p.stderr))
        return p.stdout.rstrip("\n")

    def copy(self, data_dir):
        """A copy of this database (taken while its server runs), as a new
        Database whose SQLite file lives in data_dir; drop() it after."""
        other = Database.__new__(Database)
        other.data_dir = data_dir
        if POSTGRES:
            other.name = "%s_copy%d" % (self.name, next(_seq))
            psql(cluster_url(), "CREATE DATABASE %s" % other.name, check=True)
            other.url = cluster_url(other.name)
            dump = subprocess.run([_pg_bin("pg_dump"), "-d", self.url], capture_output=True,
                                  check=True, timeout=60).stdout
            subprocess.run([_pg_bin("psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d",
                            other.url], input=dump, capture_output=True, check=True, timeout=60)
        else:
            other.name = None
            other.url = "sqlite:" + os.path.join(data_dir, "revops.db")
            p = self.run(".backup '%s'" % other.url[len("sqlite:"):])
            if p.returncode != 0:
                raise AssertionError("sqlite3 .backup failed: %s" % p.stderr)
        return other

    def drop_triggers(self, table):
        """Drops every trigger on table (as someone editing the database
        by hand could); returns their names."""
        if POSTGRES:
            names = [r[0] for r in self.rows("SELECT tgname FROM pg_trigger WHERE tgrelid = '%s'"
                                             "::regclass AND NOT tgisinternal" % table)]
            sql = "".join("DROP TRIGGER %s ON %s;" % (n, table) for n in names)
        else:
            names = [r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type ="
                                             " 'trigger' AND tbl_name = '%s'" % table)]
            sql = "".join("DROP TRIGGER %s;" % n for n in names)
        if names:
            p = self.run(sql)
            if p.returncode != 0:
                raise AssertionError("%s failed: %s" % (sql, p.stderr))
        return names

    def contents(self):
        """Every byte the database holds, as the backend stores or dumps it
        (the SQLite file and its WAL; pg_dump of the PostgreSQL database):
        for proving a secret is not stored in clear."""
        if POSTGRES:
            return subprocess.run([_pg_bin("pg_dump"), "-d", self.url], capture_output=True,
                                  check=True, timeout=60).stdout
        blob = b""
        for name in ("revops.db", "revops.db-wal"):
            path = os.path.join(self.data_dir, name)
            if os.path.exists(path):
                with open(path, "rb") as f:
                    blob += f.read()
        return blob

    def drop(self):
        """Removes a PostgreSQL database (its connections closed first);
        the SQLite file goes with the data directory."""
        if POSTGRES and self.name:
            psql(cluster_url(), "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.name)
            self.name = None
