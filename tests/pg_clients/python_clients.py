"""Python's Postgres clients against `gpuledger serve`: psycopg 3 (server-side parameters, the
extended protocol) and pandas.read_sql through SQLAlchemy (what a notebook does), printing one
JSON object of what each saw. Usage: python_clients.py HOST PORT USER PASSWORD SQLFILE MONTH TEAM"""
import json
import sys

import pandas as pd
import psycopg
import sqlalchemy as sa

host, port, user, password, sql_file, month, team = sys.argv[1:8]
cookbook = open(sql_file).read()
out = {}


def conninfo(pw):
    return dict(host=host, port=int(port), user=user, password=pw, dbname="finance", sslmode="disable", connect_timeout=20)


with psycopg.connect(**conninfo(password), autocommit=True) as conn:
    cur = conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1")
    out["psycopg_tables"] = [r[0] for r in cur.fetchall()]
    cur = conn.execute(cookbook.replace("$month", "%(month)s").replace("$team", "%(team)s"), {"month": month, "team": team})
    names = [d.name for d in cur.description]
    rows = cur.fetchall()
    out["psycopg_cloud_cost"] = str(sum(r[names.index("cloud_cost")] for r in rows))
    out["psycopg_rows"] = len(rows)
    try:
        conn.execute("DELETE FROM pods")
        out["psycopg_write"] = "accepted"
    except psycopg.Error as e:
        out["psycopg_write"] = e.sqlstate

try:
    psycopg.connect(**conninfo(password + "-wrong")).close()
    out["psycopg_bad_password"] = "accepted"
except psycopg.OperationalError as e:
    out["psycopg_bad_password"] = str(e)

engine = sa.create_engine(f"postgresql+psycopg://{user}:{password}@{host}:{port}/finance")
out["sqlalchemy_tables"] = sorted(sa.inspect(engine).get_table_names() + sa.inspect(engine).get_view_names())
frame = pd.read_sql(sa.text(cookbook.replace("$month", ":month").replace("$team", ":team")), engine, params={"month": month, "team": team})
out["pandas_columns"] = list(frame.columns)
out["pandas_cloud_cost"] = str(sum(frame["cloud_cost"]))
with engine.connect() as c:
    try:
        c.execute(sa.text("CREATE TABLE t AS SELECT 1"))
        out["sqlalchemy_write"] = "accepted"
    except sa.exc.DBAPIError as e:
        out["sqlalchemy_write"] = e.orig.sqlstate
print(json.dumps(out))
