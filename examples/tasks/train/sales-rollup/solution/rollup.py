"""Roll up regional sales CSVs by product category.

    python3 rollup.py --sales DIR --skus FILE --out DIR [--skip-unknown]

Writes DIR/rollup.csv (category,units,revenue; revenue descending, then category) and DIR/top_sku.txt (the SKU
with the highest revenue). Money is summed in integer cents, so no float rounding creeps in.
"""

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # lib/ sits beside this file

from lib.money import format_cents, to_cents  # noqa: E402


def read_categories(path: Path) -> dict[str, str]:
    categories = {}
    with path.open(newline="") as f:
        rows = csv.reader(f, delimiter="\t")
        next(rows, None)  # header
        for row in rows:
            if len(row) >= 2 and row[0].strip():
                categories[row[0].strip()] = row[1].strip()
    return categories


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sales", type=Path, required=True)
    parser.add_argument("--skus", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-unknown", action="store_true")
    args = parser.parse_args()

    categories = read_categories(args.skus)
    units: dict[str, int] = defaultdict(int)
    revenue: dict[str, int] = defaultdict(int)
    by_sku: dict[str, int] = defaultdict(int)
    for path in sorted(args.sales.glob("*.csv")):
        with path.open(newline="") as f:
            for sale in csv.DictReader(f):
                sku = sale["sku"].strip()
                category = categories.get(sku)
                if category is None:
                    if args.skip_unknown:
                        continue
                    category = "unknown"
                qty = int(sale["qty"])
                cents = qty * to_cents(sale["unit_price"])
                units[category] += qty
                revenue[category] += cents
                by_sku[sku] += cents

    args.out.mkdir(parents=True, exist_ok=True)
    order = sorted(revenue, key=lambda c: (-revenue[c], c))
    with (args.out / "rollup.csv").open("w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["category", "units", "revenue"])
        for category in order:
            writer.writerow([category, units[category], format_cents(revenue[category])])
    top = max(sorted(by_sku), key=lambda s: by_sku[s])
    (args.out / "top_sku.txt").write_text(top + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
