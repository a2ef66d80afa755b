"""What each page shows, as template context: the runs, a run's report and curves, and a comparison of two
runs. Episode-level pages are in `episode_pages.py`. Each builder takes the library and the query parameters
and returns a dict for its template; bad parameters raise `BadParameter`, unknown runs `UnknownRun`."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

from jinja2 import Environment
from markupsafe import Markup, escape

from openforge.store import is_retried
from openforge.view import params as p
from openforge.view.charts import bar_chart
from openforge.view.conversation import MEDIA_PLACEHOLDERS
from openforge.view.discover import read_files
from openforge.view.episode_pages import episode_page, episodes_page, group_page, groups_page
from openforge.view.library import Library, OpenStore
from openforge.view.summary import summarize, unit_diffs
from openforge.view.training import charts, flatten, training

# The fields of steps.jsonl / evals.jsonl records the run page shows (a field a run did not write shows as "–").
STEP_KEYS = (
    "step",
    "reward",
    "pass_rate",
    "groups",
    "groups_with_signal",
    "tokens",
    "merge_rate",
    "policy_version",
    "staleness",
    "stale_groups_dropped",
    "behaviour_ratio_mean",
    "behaviour_ratio_max",
    "behaviour_ratio_truncated",
    "lora",
    "seconds",
)
EVAL_KEYS = ("after_steps", "pass_at_1", "graded", "policy")

__all__ = [
    "compare_page",
    "episode_page",
    "episodes_page",
    "group_page",
    "groups_page",
    "index_page",
    "install_filters",
    "run_page",
]


# ---- filters the templates use --------------------------------------------------------------------------------


def pct(value: Any) -> str:
    return "–" if not isinstance(value, (int, float)) else f"{100 * value:.1f}%"


def num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


def seconds(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    return f"{value:.2f} s" if value < 60 else f"{value / 60:.1f} min"


def when(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    return dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def marked(value: Any) -> Markup:
    """Text the agent or harness wrote, escaped, with the placeholders of omitted images/files marked."""
    out = escape("" if value is None else str(value))
    for placeholder in MEDIA_PLACEHOLDERS:
        out = out.replace(escape(placeholder), Markup('<span class="media">{}</span>').format(placeholder))
    return out


def short(value: Any, length: int = 80) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= length else text[: length - 1] + "…"


def install_filters(env: Environment) -> None:
    env.filters.update(
        pct=pct, num=num, seconds=seconds, when=when, pretty=pretty, compact=compact, marked=marked, short=short
    )
    env.globals.update(url=p.url, is_retried=is_retried)


# ---- shared ---------------------------------------------------------------------------------------------------


def store_from(library: Library, params: Mapping[str, str]) -> OpenStore:
    run = p.integer(params, "run", 0, 0)
    return library.open(run, p.text(params, "store", "."))


def _store_name(opened: OpenStore) -> str:
    return opened.run.name if opened.ref.label == "." else f"{opened.run.name} · {opened.ref.label}"


def store_choices(library: Library) -> list[tuple[str, str]]:
    """("run:label", readable name) of every store of every run, for the compare form."""
    out = []
    for i, run in enumerate(library.runs):
        for ref in run.stores:
            out.append((f"{i}:{ref.label}", f"{run.name} · {ref.label}" if ref.label != "." else run.name))
    return out


# ---- pages ----------------------------------------------------------------------------------------------------


def index_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    runs = []
    for i in range(len(library.runs)):
        run = library.refresh(i)
        runs.append(
            {
                "index": i,
                "run": run,
                "stores": [(ref, library.open(i, ref.label).store.count_episodes()) for ref in run.stores],
            }
        )
    return {"title": "Runs", "runs": runs, "choices": store_choices(library), "crumbs": []}


def run_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    index = p.integer(params, "run", 0, 0)
    run = library.refresh(index)
    stores = []
    for ref in run.stores:
        opened = library.open(index, ref.label)
        stores.append(
            {
                "ref": ref,
                "summary": summarize(opened.store),
                "model": opened.model_dir,
                "files_report": ref.path != run.path and (ref.path / "report.json").is_file(),
            }
        )
    t = training(run.files)
    evals = []
    for record in t.evals:
        after = record.get("after_steps")
        label = f"eval/after-{after:06d}" if isinstance(after, int) else None
        evals.append({**{k: record.get(k) for k in EVAL_KEYS}, "store": label if label and run.store(label) else None})
    steps = [{k: record.get(k) for k in STEP_KEYS} for record in reversed(t.steps)][:200]
    rl = run.store("rl")
    report = run.files.report or {}
    facts = [(k, v) for k, v in report.items() if isinstance(v, (str, int, float, bool)) or v is None]
    return {
        "title": run.name,
        "index": index,
        "run": run,
        "stores": stores,
        "training": t,
        "charts": charts(t),
        "evals": evals,
        "steps": steps,
        "rl": rl,
        "facts": facts,
        "timings": report.get("timings_s") if isinstance(report.get("timings_s"), dict) else None,
        "analysis": flatten(run.files.analysis) if run.files.analysis else [],
        "crumbs": [(run.name, None)],
    }


def _side(library: Library, spec: str | None, name: str) -> dict[str, Any] | None:
    if spec is None:
        return None
    run_text, sep, label = spec.partition(":")
    if not sep or not run_text.isdigit():
        raise p.BadParameter(f"{name}: expected RUN:STORE (e.g. 0:eval/after-000002), got {spec!r}")
    opened = library.open(int(run_text), label)
    # behaviour metrics of that store: its own analysis.json, or the run's when the store is the run directory
    analysis = read_files(opened.ref.path).analysis if opened.ref.path != opened.run.path else opened.run.files.analysis
    return {
        "spec": spec,
        "opened": opened,
        "summary": summarize(opened.store),
        "analysis": dict(flatten(analysis)) if analysis else {},
    }


def compare_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    choices = store_choices(library)
    a = _side(library, p.text(params, "a"), "a")
    b = _side(library, p.text(params, "b"), "b")
    context: dict[str, Any] = {
        "title": "Compare",
        "choices": choices,
        "a": a,
        "b": b,
        "diffs": [],
        "chart": None,
        "harnesses": [],
        "metric_keys": [],
        "crumbs": [("compare", None)],
    }
    if a and b:
        context["diffs"] = unit_diffs(a["summary"], b["summary"])
        names = [f"{side}: {_store_name(x['opened'])}" for side, x in (("A", a), ("B", b))]
        context["chart"] = bar_chart(
            "pass@1", [("A", a["summary"].pass_at_1), ("B", b["summary"].pass_at_1)], chart_id="chart-compare"
        )
        context["names"] = names
        context["harnesses"] = sorted(set(a["summary"].by_harness) | set(b["summary"].by_harness))
        context["metric_keys"] = sorted(set(a["analysis"]) | set(b["analysis"]))
    return context
