"""slime's MODEL_ARGS as catalog data, for the models acrl's config.json translation does not cover.

``python -m acrl.compiler._slime.catalog_facts FACTS_DIR [FACTS_DIR ...] -o FILE`` reads the ``model_args.json``
of each folder (tests/data/slime/<commit>/, written by :mod:`.model_facts` from slime's own scripts) and writes
FILE (the project's copy: compiler/_pipeline/model_args/slime_models.json): for each script name of any of the
commits, its resolved MODEL_ARGS (flag values only, never the script) and the commit they were read at, the first
folder given that has the script winning. The catalog (compiler/_pipeline/model_args/catalog.py) takes from it the
models whose architecture hf_config.derive_model_args cannot translate (multi-latent attention, DeepSeek-style
routers, hybrid linear attention, sliding windows, multi-token prediction, slime_plugins specs); the others it
derives from published config.json fields and holds to these values in tests/test_catalog_fidelity.py.
Never imported by the compile path.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def catalog_data(facts: Sequence[dict[str, Any]], argv: Sequence[str]) -> dict[str, Any]:
    """The catalog data for ``facts`` (parsed model_args.json files, the preferred commit first)."""
    models: dict[str, dict[str, Any]] = {}
    for data in facts:
        commit = data["provenance"]["commit"]
        for name, args in sorted(data["scripts"].items()):
            models.setdefault(name, {"commit": commit, "args": list(args)})
    first = facts[0]["provenance"]
    return {"provenance": {"repository": first["repository"],
                           "commits": [data["provenance"]["commit"] for data in facts],
                           "from": "tests/data/slime/<commit>/model_args.json: scripts/models/*.sh resolved to "
                                   "MODEL_ARGS (flag values) by acrl's args_source = \"script\" resolver",
                           "generator": " ".join(["python -m acrl.compiler._slime.catalog_facts", *argv])},
            "models": models}


def dumps(data: dict[str, Any]) -> str:
    """JSON with one model a line."""
    head = json.dumps({"provenance": data["provenance"]}, indent=1, ensure_ascii=False)
    rows = ",\n".join(f"  {json.dumps(name)}: {json.dumps(model, ensure_ascii=False)}"
                      for name, model in data["models"].items())
    return f'{head[:-2]},\n "models": {{\n{rows}\n }}\n}}\n'


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m acrl.compiler._slime.catalog_facts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("facts", metavar="FACTS_DIR", type=Path, nargs="+",
                        help="tests/data/slime/<commit> folders, the preferred commit first")
    parser.add_argument("-o", "--out", type=Path, required=True, help="the JSON file to write")
    parsed = parser.parse_args(args)
    facts = [json.loads((folder / "model_args.json").read_text(encoding="utf-8")) for folder in parsed.facts]
    parsed.out.write_text(dumps(catalog_data(facts, args)), encoding="utf-8")
    print(parsed.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
