"""Run the SBC cases (:mod:`gpdsl.testing.sbc_cases`) and write ``docs/validation``: per case a record of its ranks
(``NAME.json``) and a rank histogram per element (``NAME.png``), and the table of ``docs/validation.md``.

``python -m gpdsl.testing.sbc_report --out docs/validation`` runs every case, one after another;
``--case NAME`` (repeatable) runs only those, and ``--table-only`` rewrites the PNGs and the table from the records
already there. The table sits between the markers ``<!-- sbc-table:start -->`` and ``<!-- sbc-table:end -->`` of
the markdown file; the text around it is left as it is.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

from gpdsl.testing.sbc import SBCResult, bin_counts

START, END = "<!-- sbc-table:start -->", "<!-- sbc-table:end -->"
ALPHA = 0.001
COLUMNS = ("case", "engine", "settings", "model", "replicates", "elements", "min KS p", "min chi2 p",
           "Bonferroni level", "passes", "seconds")


def case_record(entry, result: SBCResult) -> dict:
    """What is kept of a run of a case: its description, the ranks and the run's seconds (JSON-ready)."""
    from gpdsl.testing.sbc_cases import SETUPS

    return {
        "case": entry.name, "method": entry.method, "settings": entry.settings_text(),
        "model": SETUPS[entry.setup].label, "seed": entry.seed, "note": entry.note,
        "posterior_draws": result.num_posterior_draws, "seconds": round(result.seconds, 1),
        "fit_seconds": round(result.info.get("fit_seconds", float("nan")), 1),
        "commit": _commit(), "created": time.strftime("%Y-%m-%d"),
        "elements": result.element_names, "ranks": result.ranks.tolist(), "num_draws": result.num_draws.tolist(),
        "normalised_ranks": np.round(result.normalised_ranks, 6).tolist(),
        "ess": [[None if not math.isfinite(v) else round(v, 1) for v in row] for row in result.ess.tolist()],
    }


def result_of(record: dict) -> SBCResult:
    """The :class:`~gpdsl.testing.sbc.SBCResult` a record keeps."""
    ess = np.asarray([[np.nan if v is None else v for v in row] for row in record["ess"]], dtype=float)
    return SBCResult(list(record["elements"]), np.asarray(record["ranks"]), np.asarray(record["num_draws"]),
                     np.asarray(record["normalised_ranks"], dtype=float), ess, record["posterior_draws"],
                     seconds=record["seconds"])


def plot_ranks(result: SBCResult, path: Path, title: str) -> None:
    """Histograms of the normalised ranks, one per element, with the central 99% binomial band of a bin's count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = result.default_bins()
    low, high = stats.binom.interval(0.99, result.num_replicates, 1 / bins)
    table = result.uniformity(bins)
    count = len(result.element_names)
    columns = min(4, count)
    rows = math.ceil(count / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(3.0 * columns, 2.2 * rows + 0.4), squeeze=False,
                                sharex=True, sharey=True)
    edges = np.linspace(0.0, 1.0, bins + 1)
    for j, name in enumerate(result.element_names):
        ax = axes.flat[j]
        ax.axhspan(low, high, color="0.85", lw=0)
        ax.axhline(result.num_replicates / bins, color="0.5", lw=0.8)
        ax.bar(edges[:-1], bin_counts(result.normalised_ranks[:, j], bins), width=1 / bins, align="edge",
               color="C0", edgecolor="white", lw=0.5)
        ax.set_title(f"{name}  KS p={table.loc[name, 'ks_pvalue']:.2g}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_xlim(0, 1)
    for ax in axes[-1]:
        ax.set_xlabel("normalised rank", fontsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("replicates", fontsize=7)
    for ax in list(axes.flat)[count:]:
        ax.axis("off")
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def table_row(record: dict, images: str = "validation") -> list[str]:
    """The table's cells of one record (``images``: the folder of the PNGs, relative to the page)."""
    result = result_of(record)
    table = result.uniformity()
    passes = result.passes(ALPHA)
    return [f"[{record['case']}]({images}/{record['case']}.png)", f"`{record['method']}`",
            record["settings"].replace("|", "\\|"), record["model"], str(result.num_replicates),
            str(len(result.element_names)), f"{table['ks_pvalue'].min():.3g}", f"{table['chi2_pvalue'].min():.3g}",
            f"{result.corrected_level(ALPHA):.2g}", "yes" if passes else "**no**", f"{record['seconds']:.0f}"]


def markdown_table(records: list[dict], images: str = "validation") -> str:
    """The table of the records."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(table_row(record, images)) + " |" for record in records]
    return "\n".join(lines)


def replace_table(markdown: Path, table: str) -> None:
    """Put ``table`` between the markers of ``markdown`` (appended with them when they are missing)."""
    text = markdown.read_text() if markdown.exists() else ""
    block = f"{START}\n{table}\n{END}"
    if START in text and END in text:
        text = text[:text.index(START)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip() + ("\n\n" if text else "") + block + "\n"
    markdown.write_text(text)


def write_outputs(out: Path, markdown: Path) -> list[dict]:
    """Rewrite every case's PNG from its record in ``out``, and the table in ``markdown``; returns the records."""
    from gpdsl.testing.sbc_cases import CASES

    records = []
    for entry in CASES:
        path = out / f"{entry.name}.json"
        if path.exists():
            record = json.loads(path.read_text())
            result = result_of(record)
            plot_ranks(result, out / f"{entry.name}.png",
                       f"{record['case']}: {result.num_replicates} replicates, min p = {result.min_pvalue():.2g}, "
                       f"Bonferroni level {result.corrected_level(ALPHA):.1g}")
            records.append(record)
    replace_table(markdown, markdown_table(records, Path(os.path.relpath(out, markdown.parent)).as_posix()))
    return records


def _commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=True).stdout.strip() or None
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv=None) -> int:
    """The command line (module docstring)."""
    from gpdsl.testing.sbc_cases import CASES, case, run_case

    parser = argparse.ArgumentParser(prog="python -m gpdsl.testing.sbc_report", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/validation"), help="records and PNGs")
    parser.add_argument("--markdown", type=Path, help="the page with the table (default: OUT.md)")
    parser.add_argument("--case", action="append", dest="cases", metavar="NAME",
                        help=f"run only this case (repeatable): {', '.join(c.name for c in CASES)}")
    parser.add_argument("--replicates", type=int, help="replicates of each case run (default: the case's)")
    parser.add_argument("--table-only", action="store_true", help="run nothing; rewrite PNGs and table")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    markdown = args.markdown or args.out.with_suffix(".md")
    if not args.table_only:
        for entry in [case(name) for name in args.cases] if args.cases else CASES:
            print(f"{entry.name}: {args.replicates or entry.replicates} replicates ...", flush=True)
            result, _ = run_case(entry, args.replicates)
            (args.out / f"{entry.name}.json").write_text(json.dumps(case_record(entry, result)) + "\n")
            print(result.report(), flush=True)
            print(f"{entry.name}: {'passes' if result.passes(ALPHA) else 'FAILS'} in {result.seconds:.0f} s",
                  flush=True)
    write_outputs(args.out, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
