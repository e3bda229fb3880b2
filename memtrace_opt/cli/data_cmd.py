"""`memtrace data ...`: inspect and fetch benchmark datasets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from rich.console import Console
from rich.table import Table

from memtrace_opt.cli import app
from memtrace_opt.cli.options import GoldOption
from memtrace_opt.data import (
    DEFAULT_GOLD,
    Dataset,
    DatasetStats,
    DataSlice,
    GoldRevision,
    fetch_dataset,
    load_data,
)

data_app = typer.Typer(
    help="Inspect and fetch benchmark datasets (LoCoMo, LongMemEval, the sample).", no_args_is_help=True
)
app.add_typer(data_app, name="data")


class LoadedStats(NamedTuple):
    dataset: Dataset
    stats: DatasetStats


def dataset_stats(spec: str, gold: str = DEFAULT_GOLD) -> LoadedStats:
    """Load a data argument (PATH[:SAMPLE_ID], locomo, longmemeval or sample) with the `gold` answers and count it."""
    dataset = load_data(spec, DataSlice(gold=gold))
    return LoadedStats(dataset, dataset.stats())


def stats_payload(dataset: Dataset, stats: DatasetStats) -> dict[str, Any]:
    """The `--json` output: the dataset's name and path, its counts, and what the gold revision changed."""
    revision = dataset.gold_revision or GoldRevision()
    return {"name": dataset.name, "path": dataset.path, **stats.to_dict(), "gold": revision.summary()}


def stats_table(dataset: Dataset, stats: DatasetStats) -> Table:
    """A rich table of the counts, questions broken down by category."""
    table = Table(title=f"{dataset.name} ({Path(dataset.path).name})")
    table.add_column("what")
    table.add_column("count", justify="right")
    for label, value in (
        ("conversations", stats.conversations),
        ("sessions", stats.sessions),
        ("turns", stats.turns),
    ):
        table.add_row(label, f"{value:,}")
    table.add_row("questions", f"{stats.questions:,}", end_section=True)
    for category, count in stats.questions_by_category.items():
        table.add_row(f"  {category}", f"{count:,}")
    if stats.abstention_questions:
        table.add_row("  (abstention)", f"{stats.abstention_questions:,}")
    revision = dataset.gold_revision or GoldRevision()
    source = f" ({revision.corrections})" if revision.corrections else ""
    table.add_section()
    table.add_row(f"gold: {revision.gold}{source}", "")
    if revision.gold != "upstream":
        for rule, count in revision.counts().items():
            table.add_row(f"  changed by {rule.replace('_', ' ')}", f"{count:,}")
        table.add_row("  removed by the corrections", f"{len(revision.removed):,}")
    return table


@data_app.command("stats")
def stats_command(
    path: Annotated[
        str, typer.Argument(help="A dataset file (PATH[:SAMPLE_ID]) or: locomo, longmemeval, sample.")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON.")] = False,
    gold: GoldOption = None,
) -> None:
    """Count conversations, sessions, turns and questions (by category) in a dataset, and the gold answers the
    corrections and the glued-word rule changed (see --gold)."""
    dataset, stats = dataset_stats(path, gold or DEFAULT_GOLD)
    if as_json:
        typer.echo(json.dumps(stats_payload(dataset, stats), indent=2))
    else:
        Console().print(stats_table(dataset, stats))


@data_app.command("fetch")
def fetch_command(
    name: Annotated[
        str, typer.Argument(help="Dataset to download: locomo or longmemeval (the oracle split).")
    ],
    dest: Annotated[
        Path | None, typer.Option("--dest", help="Folder to put it in (default: the user cache).")
    ] = None,
    url: Annotated[
        str | None, typer.Option("--url", help="Download from this URL instead (e.g. a mirror).")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="Network timeout in seconds.")] = 30.0,
    force: Annotated[
        bool, typer.Option("--force", help="Download again even if a verified copy exists.")
    ] = False,
) -> None:
    """Download a dataset from its home, verify its sha256 and print where it is."""
    console = Console(stderr=True)
    with console.status(f"fetching {name} ..."):
        target = fetch_dataset(name, dest, url=url, timeout=timeout, force=force)
    typer.echo(str(target))
