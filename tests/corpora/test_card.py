"""The dataset card is a huggingface_hub DatasetCard whose metadata the library reads back as written."""

from __future__ import annotations

from huggingface_hub import DatasetCard

from dbt_harvest.corpora.card import CardFacts, RepoProvenance, render


def _facts(licenses: tuple[str, str] = ("MIT", "MIT")) -> CardFacts:
    return CardFacts(
        title="dbt repair tasks",
        generator_versions=("0.1.0",),
        tool_versions={"dbt-core": "1.11.2"},
        splits={"train": 1200, "dev": 30},
        provenance=(
            RepoProvenance("acme/shop", "https://github.com/acme/shop", "a" * 40, licenses[0], "train", 1200),
            RepoProvenance("acme/meters", "https://github.com/acme/meters", "b" * 40, licenses[1], "dev", 30),
        ),
        left_out_repos=0,
        left_out_tasks=0,
        public=True,
        exclusions_source={},
        exclusions_counts={},
        sealed_test_tasks=12,
        fingerprints={"train": "f00d", "dev": "beef"},
    )


def test_the_card_metadata_round_trips_through_huggingface_hub() -> None:
    text = render(_facts(), ["train", "dev"])
    card = DatasetCard(text)
    data = card.data.to_dict()
    assert text.startswith("---\n") and "\n# dbt repair tasks\n" in card.text
    assert data["license"] == "mit" and data["pretty_name"] == "dbt repair tasks"
    assert data["task_categories"] == ["text-generation"] and data["size_categories"] == ["1K<n<10K"]
    assert data["configs"] == [
        {
            "config_name": "default",
            "data_files": [
                {"split": "train", "path": "data/train-f00d-*"},
                {"split": "dev", "path": "data/dev-beef-*"},
            ],
        }
    ]
    assert "swe-bench" in data["tags"]


def test_a_card_for_one_split_lists_only_that_split_and_its_size() -> None:
    data = DatasetCard(render(_facts(), ["dev"], other_configs={"train": "data/train-old-*"})).data.to_dict()
    assert [f["split"] for f in data["configs"][0]["data_files"]] == ["dev", "train"]
    assert data["size_categories"] == ["n<1K"]


def test_repositories_under_different_licenses_are_other_with_a_name() -> None:
    data = DatasetCard(render(_facts(("MIT", "Apache-2.0")), ["train", "dev"])).data.to_dict()
    assert data["license"] == "other" and data["license_name"].startswith("per-repository")
