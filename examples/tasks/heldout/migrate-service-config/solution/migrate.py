"""Convert a format-1 INI configuration to the service's JSON configuration.

    python3 migrate.py LEGACY.ini MAPPING.tsv DEFAULTS.json.gz OUT.json

MAPPING.tsv: one rename per line, `section.key<TAB>new_section.new_key<TAB>type` (type: str, int or upper),
after a header line. DEFAULTS.json.gz: gzip-compressed JSON of settings to add where the INI file has none
(an empty file: no defaults). Prints the number of settings written.
"""

import configparser
import gzip
import json
import sys
from pathlib import Path

CONVERT = {"str": str, "int": int, "upper": lambda value: value.upper()}


def read_mapping(path: Path) -> list[tuple[str, str, str]]:
    rows = []
    for line in path.read_text().splitlines()[1:]:
        if line.strip():
            old, new, kind = line.split("\t")
            if kind not in CONVERT:
                raise SystemExit(f"{path}: unknown type {kind!r} for {old}")
            rows.append((old, new, kind))
    return rows


def read_defaults(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data)) if data else {}


def main(argv: list[str]) -> int:
    legacy, mapping, defaults, out = (Path(a) for a in argv)
    ini = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    ini.read(legacy)
    result: dict[str, dict] = {}
    for old, new, kind in read_mapping(mapping):
        section, key = old.split(".", 1)
        if ini.has_option(section, key):
            new_section, new_key = new.split(".", 1)
            result.setdefault(new_section, {})[new_key] = CONVERT[kind](ini.get(section, key))
    for section, values in read_defaults(defaults).items():
        for key, value in values.items():
            result.setdefault(section, {}).setdefault(key, value)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(sum(len(values) for values in result.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
