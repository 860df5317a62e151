"""run-forensics in the browser: `forensics app [--db PATH] [--port N] [--run NAME]` starts this script.

Reads top to bottom: which database (`-- --db PATH` after streamlit's own arguments, else $FORENSICS_DB, else
the user cache), the runs it holds, the sidebar (run and page; both live in the URL, so a link opens one run's
page), then the chosen page from `app/pages.py`. Every read goes through `app/data.py`: read-only, brief, cached.
"""

from __future__ import annotations

import argparse
import os
import sys

import streamlit as st

from app import pages
from app.data import StoreProblem, query
from ingest.store import db_location

PAGES = {"Runs": pages.runs_page, "Run report": pages.report_page, "Layers": pages.layers_page,
         "Checkpoints and replays": pages.checkpoints_page, "Compare": pages.compare_page}


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="streamlit_app.py", add_help=False)
    parser.add_argument("--db")
    parser.add_argument("--run")
    args, _ = parser.parse_known_args(sys.argv[1:])
    return args


st.set_page_config(page_title="run-forensics", page_icon="🔎", layout="wide")
st.markdown(pages.CSS, unsafe_allow_html=True)
args = _arguments()
db = db_location(args.db, os.environ).resolve()  # the CLI's one rule: --db, $FORENSICS_DB, the user cache

try:
    runs = query(db, "app_runs")
except StoreProblem as problem:
    st.title("run-forensics")
    st.error(f"The database cannot be read: {problem}")
    st.caption("The page tries again on every reload; nothing was written.")
    st.stop()

if runs.height == 0:
    st.title("run-forensics")
    st.info(f"The database {pages.md(db)} holds no runs yet. Add one with forensics analyze RUN\\_DIR --db "
            f"{pages.md(db)}, "
            "then reload this page.")
    st.stop()

# The run, the page and a focused finding live in the URL (?run=...&page=...&finding=...), so a link opens them.
ordered = pages.worst_first(runs)  # the sidebar lists runs as the Runs page does by default
names = ordered["name"].to_list()
ids = ordered["run_id"].to_list()
# A parameter that names nothing here (a typo, an old link, a hostile value) falls back to the default view.
if st.session_state.get("run") not in ids:
    wanted = st.query_params.get("run") or args.run
    st.session_state.run = next((i for i, n in zip(ids, names) if wanted in (i, n)), ids[0])
if st.session_state.get("page") not in PAGES:
    wanted_page = st.query_params.get("page")
    st.session_state.page = wanted_page if wanted_page in PAGES else ("Run report" if args.run else "Runs")

with st.sidebar:
    st.markdown("### 🔎 run-forensics")
    st.radio("Page", list(PAGES), key="page")
    st.selectbox("Run", ids, key="run", format_func=dict(zip(ids, names)).__getitem__)
    st.caption(f"Database: {pages.md(db)}")
    st.caption("Read-only. Reload after `forensics analyze` to see new results.")

linked = st.query_params.get("run")
if linked is not None and linked not in (st.session_state.run, dict(zip(ids, names))[st.session_state.run]) \
        and "finding" in st.query_params:
    del st.query_params["finding"]  # a finding id belongs to the run it was linked from
st.query_params["run"] = st.session_state.run
st.query_params["page"] = st.session_state.page
try:
    PAGES[st.session_state.page](db, runs, st.session_state.run)
except StoreProblem as problem:  # the store went away or got locked between two queries of one page
    st.error(f"The database cannot be read: {problem}")
    st.caption("Reload the page to try again; nothing was written.")
