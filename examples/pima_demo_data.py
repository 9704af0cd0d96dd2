"""Write the demo's data file: the first rows of Pima, inputs standardised, labels 0/1."""

import argparse
import json
from pathlib import Path

from gpdsl import datasets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    pima = datasets.pima().subset(range(args.rows))
    X = (pima.X - pima.X.mean(axis=0)) / pima.X.std(axis=0)
    data = {"N": int(pima.n), "D": int(pima.d), "X": X.tolist(), "y": [int(v) for v in pima.y]}
    Path(args.output).write_text(json.dumps(data))
    print(f"wrote {args.output}: N={pima.n}, D={pima.d}, classes {pima.class_counts()}")


if __name__ == "__main__":
    main()
