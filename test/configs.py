"""Configs the end-to-end tests write: a built-in config with some sections changed."""

from pathlib import Path

import yaml

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
TABLE_1 = {"J_Azz": 0.01, "J_Byy": 0.01, "b1": 1e-4, "b2": 1e-4}  # §4.7's start values
#: ``--set`` for the Table 1 start
TABLE_1_SET = ",".join(f"{name}={value:g}" for name, value in TABLE_1.items())
#: furuta_synthetic's inertias, the truth the node runs must find
TRUTH = {name: yaml.safe_load((CONFIG_DIR / "furuta_synthetic.yaml").read_text())
         ["parameters"][name] for name in ("J_Azz", "J_Byy")}


def write_config(path: Path, base: str = "furuta_synthetic.yaml", *, parameters=None,
                 **sections) -> str:
    """``config/<base>`` with ``parameters`` updated and ``sections`` replaced, at ``path``.

    Returns the path as a string (for command lines and launch arguments).
    """
    config = yaml.safe_load((CONFIG_DIR / base).read_text())
    config["parameters"] = {**config["parameters"], **(parameters or {})}
    config.update(sections)
    path.write_text(yaml.safe_dump(config))
    return str(path)
