"""The e2e projects are what the acceptance test needs them to be: original dbt projects with seeds,
staging and mart models, schema tests and a license of our own, each offering every mutation family; and
one package laid out as most of the committed corpus (models at the root, ``integration_tests/`` builds it
as ``local: ../`` with its own seeds, a hub package dependency at the root)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dbt_harvest.core.licenses import detect_license
from dbt_harvest.mutators import FAMILIES

PROJECTS = Path(__file__).resolve().parent / "projects"
NAMES = ("lending_library", "clinic_scheduling", "freight_ops")
PACKAGE = "harvest_meters"


def test_the_projects_are_all_there() -> None:
    assert sorted(p.name for p in PROJECTS.iterdir() if p.is_dir()) == sorted((*NAMES, PACKAGE))


def test_the_package_is_laid_out_as_the_corpus_packages_are() -> None:
    root = PROJECTS / PACKAGE
    assert yaml.safe_load((root / "dbt_project.yml").read_text())["name"] == PACKAGE
    assert detect_license(root) == "Apache-2.0"
    assert yaml.safe_load((root / "integration_tests" / "packages.yml").read_text()) == {"packages": [{"local": "../"}]}
    assert [p["package"] for p in yaml.safe_load((root / "packages.yml").read_text())["packages"]] == [
        "harvestlabs/shop_calendar"
    ]  # served offline by the embedded example's package mirror
    assert len(list((root / "integration_tests" / "seeds").glob("*.csv"))) == 3
    assert len(list((root / "models").glob("*.sql"))) == 3 and not (root / "integration_tests" / "models").exists()


@pytest.mark.parametrize("name", NAMES)
def test_a_project_has_seeds_staging_marts_tests_and_our_license(name: str) -> None:
    root = PROJECTS / name
    assert yaml.safe_load((root / "dbt_project.yml").read_text())["name"] == name
    assert detect_license(root) == "Apache-2.0"
    assert len(list((root / "seeds").glob("*.csv"))) >= 3
    for layer in ("staging", "marts"):
        assert len(list((root / "models" / layer).glob("*.sql"))) >= 3
        schema = yaml.safe_load(next((root / "models" / layer).glob("_*.yml")).read_text())
        assert all(m.get("description") for m in schema["models"])
        assert any(c.get("data_tests") for m in schema["models"] for c in m.get("columns", []))


@pytest.mark.parametrize("name", NAMES)
def test_a_project_offers_every_mutation_family(name: str) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "dbt_harvest", "mutants", str(PROJECTS / name / "models"), "--json"],
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
        timeout=300,
    )
    families = {m["family"] for f in json.loads(done.stdout) for m in f["mutations"]}
    assert families == set(FAMILIES)
