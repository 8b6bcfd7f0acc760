"""Single-turn prompts show the files of the reported symptom, never a pointer at the broken one: the file
set and order depend on the reported tables only, and a positional classifier does no better than chance."""

from __future__ import annotations

import random

import pytest

from dbt_harvest.core.patching import make_patch
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord, task_id
from dbt_harvest.train.errors import PromptCoverageError
from dbt_harvest.train.lineage import lineage_path, refs, shown_order, symptom_view, upstream
from dbt_harvest.train.position_probe import probe
from dbt_harvest.train.sft_data import repair_prompt

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _task(file: str, original: str, broken: str, tables: tuple[str, ...]) -> TaskRecord:
    broken_patch = make_patch(file, original, broken)
    return TaskRecord(
        instance_id=task_id("acme__shop", COMMIT, "filter.flip", file, broken_patch + ",".join(tables)),
        pin="acme__shop@0123456789ab",
        repo="acme/shop",
        base_commit=COMMIT,
        project_dir=".",
        split="train",
        split_group="acme/shop",
        family="filter",
        operator="filter.flip",
        effect="changed_values",
        file=file,
        broken_patch=broken_patch,
        fix_patch=make_patch(file, broken, original),
        wrong_repair_patches=(),
        grading=GradingSpec(
            gold=f"{'b' * 64}.duckdb",
            condition_tabs=tables,
            condition_cols=((0,),) * len(tables),
            ignore_orders=(True,) * len(tables),
        ),
        problem_statement="Figures in the reported tables break the documented rules.",
        local_checks=LocalChecks(True, 2, 0),
        gold_sha256="b" * 64,
        license="MIT",
        versions={"duckdb": "1.5.6"},
    )


def _shown(prompt: list[dict[str, str]]) -> list[str]:
    import re

    return re.findall(r'<file path="([^"]+)">', prompt[1]["content"])


SHOP = {
    "models/staging/stg_orders.sql": "select * from {{ source('shop', 'orders') }}\n",
    "models/staging/stg_payments.sql": "select * from {{ source('shop', 'payments') }}\n",
    "models/staging/stg_customers.sql": "select * from {{ source('shop', 'customers') }}\n",
    "models/staging/schema.yml": "version: 2\nmodels:\n  - name: stg_orders\n  - name: stg_payments\n",
    "models/marts/order_totals.sql": "select o.id, sum(p.amount) as total\nfrom {{ ref('stg_orders') }} o\n"
    'join {{ ref("stg_payments") }} p on p.order_id = o.id\ngroup by 1\n',
    "models/marts/customer_value.sql": "select c.id, sum(t.total) as value\nfrom {{ ref('stg_customers') }} c\n"
    "join {{ ref('shop', 'order_totals') }} t on t.customer_id = c.id\ngroup by 1\n",
    "models/marts/schema.yml": "version: 2\nmodels:\n  - name: customer_value\n    description: lifetime value\n"
    "  - name: order_totals\n",
    "macros/cents.sql": "{% macro cents(x) %}{{ x }} * 100{% endmacro %}\n",
    "seeds/orders.csv": "id\n1\n",
}


def _broken(files: dict[str, str], path: str) -> tuple[dict[str, str], TaskRecord]:
    changed = files[path].replace("select", "select distinct", 1)
    return {**files, path: changed}, _task(path, files[path], changed, ("customer_value",))


def test_lineage_reads_one_and_two_argument_refs() -> None:
    # the package name of a two-argument ref comes along; no model file is named after it
    assert refs(SHOP["models/marts/customer_value.sql"]) == ("order_totals", "shop", "stg_customers")
    assert refs("{{ ref('a' if var('x') else 'b') }} {{ ref('c', version='2') }}") == ("a", "b", "c")
    depth = upstream(SHOP, ["models/marts/customer_value.sql"])
    assert depth == {
        "models/marts/customer_value.sql": 0,
        "models/marts/order_totals.sql": 1,
        "models/staging/stg_customers.sql": 1,
        "models/staging/stg_orders.sql": 2,
        "models/staging/stg_payments.sql": 2,
    }
    assert lineage_path(SHOP, "models/marts/customer_value.sql", "models/staging/stg_payments.sql") == (
        "models/marts/customer_value.sql",
        "models/marts/order_totals.sql",
        "models/staging/stg_payments.sql",
    )
    assert lineage_path(SHOP, "models/marts/order_totals.sql", "models/staging/stg_customers.sql") == ()


def test_two_tasks_on_the_same_table_show_the_same_files_each_in_its_own_seeded_order() -> None:
    prompts = {}
    for path in ("models/marts/customer_value.sql", "models/staging/stg_payments.sql", "models/marts/order_totals.sql"):
        files, task = _broken(SHOP, path)
        prompt = repair_prompt(task, files, 100_000)
        assert path not in prompt[1]["content"].split("<file")[0]  # the text before the files never names it
        prompts[path] = _shown(prompt)
        assert tuple(prompts[path]) == shown_order(prompts[path], task.instance_id)  # the order the task seeds
        assert prompt == repair_prompt(task, files, 100_000)  # the same task, the same prompt
    assert len({frozenset(p) for p in prompts.values()}) == 1  # the set is the reported table's
    assert len({tuple(p) for p in prompts.values()}) == 3  # the order is the task's
    shown = prompts["models/marts/customer_value.sql"]
    assert set(shown) == {
        "models/marts/customer_value.sql",
        "models/marts/order_totals.sql",
        "models/marts/schema.yml",
        "models/staging/stg_customers.sql",
        "models/staging/stg_orders.sql",
        "models/staging/stg_payments.sql",
        "models/staging/schema.yml",
    }  # no macro, no seed


def test_the_order_follows_the_seed_and_not_the_path() -> None:
    """Another seed orders the same files otherwise; no order follows the paths; the order is of the set."""
    paths = [f"models/{layer}/m{k}.sql" for layer in ("marts", "staging") for k in range(6)]
    orders = {shown_order(paths, f"task-{k}") for k in range(20)}
    assert len(orders) == 20 and tuple(sorted(paths)) not in orders
    assert shown_order(paths, "t") == shown_order(reversed([*paths, paths[0]]), "t")
    # without a seed the view orders by its reported tables (as a set)
    assert symptom_view(SHOP, ["customer_value", "order_totals"], 100_000).paths == (
        symptom_view(SHOP, ["order_totals", "customer_value"], 100_000).paths
    )


MODELS = (
    "models/marts/customer_value.sql",
    "models/marts/order_totals.sql",
    "models/staging/stg_customers.sql",
    "models/staging/stg_orders.sql",
    "models/staging/stg_payments.sql",
)


def test_the_budget_takes_models_nearest_first_and_a_row_whose_bug_is_cut_is_refused() -> None:
    files, task = _broken(SHOP, "models/staging/stg_payments.sql")
    near = sum(len(SHOP[p]) for p in MODELS[:3])  # the reported model and its parents, nothing more
    view = symptom_view(SHOP, ["customer_value"], near)
    assert set(view.paths) == set(MODELS[:3]) and not view.covers(task.file)
    assert {"models/staging/stg_payments.sql", "models/marts/schema.yml"} <= set(view.skipped)
    with pytest.raises(PromptCoverageError, match="beyond max_file_chars"):
        repair_prompt(task, files, near)


def test_a_large_schema_file_does_not_push_the_lineage_out() -> None:
    big = {**SHOP, "models/marts/schema.yml": SHOP["models/marts/schema.yml"] + "# notes\n" * 400}
    budget = sum(len(big[p]) for p in MODELS) + len(big["models/staging/schema.yml"])
    view = symptom_view(big, ["customer_value"], budget)
    assert set(view.paths) == {*MODELS, "models/staging/schema.yml"} and view.skipped == ("models/marts/schema.yml",)


def test_the_set_does_not_move_with_the_size_of_the_mutation() -> None:
    """At the budget's edge, a mutation that lengthens the broken file must not change what is shown."""
    edge = sum(len(SHOP[p]) for p in MODELS)
    shown = set()
    for path in MODELS:
        longer = SHOP[path].replace("select", "select distinct /* a much longer broken line */", 1)
        task = _task(path, SHOP[path], longer, ("customer_value",))
        shown.add(frozenset(_shown(repair_prompt(task, {**SHOP, path: longer}, edge))))
    assert len(shown) == 1 and set(next(iter(shown))) == set(MODELS)


def _random_project(rng: random.Random, n: int) -> tuple[dict[str, str], list[str]]:
    """A random DAG of ``n`` models with random names (so path order says nothing about depth)."""
    names = [f"m_{rng.randrange(16**6):06x}" for _ in range(n)]
    files = {}
    for i, name in enumerate(names):
        parents = rng.sample(names[:i], k=min(i, rng.randint(1, 3))) if i else []
        body = (
            "select 1 as id\n"
            if not parents
            else "select * from " + " join ".join(f"{{{{ ref('{p}') }}}}" for p in parents) + "\n"
        )
        files[f"models/{rng.choice(['staging', 'core', 'marts'])}/{name}.sql"] = body
    return files, names


def test_a_positional_classifier_does_no_better_than_chance() -> None:
    rng = random.Random(7)
    new_rows, old_rows = [], []
    for project in range(12):
        files, names = _random_project(rng, 12)
        for table in names[-4:]:
            root = next(p for p in files if p.endswith(f"/{table}.sql"))
            for path in upstream(files, [root]):
                broken, task = _broken(files, path)
                task = _task(path, files[path], broken[path], (table,))
                shown = _shown(repair_prompt(task, broken, 100_000))
                new_rows.append((f"{project}/{table}/{path}", shown, path))
                old_rows.append((f"{project}/{table}/{path}", [path, *[p for p in shown if p != path]], path))
    new, old = probe(new_rows), probe(old_rows)
    assert new.held_out >= 100
    # the probe finds a position that gives the bug away (the former "mutated file first" prompts) ...
    assert (old.rule, old.accuracy) == ("start:0", 1.0)
    # ... and finds none in the prompts now: its best rule is within noise of guessing
    assert new.accuracy <= new.chance + 0.1, new


def test_on_a_real_layout_no_place_in_the_prompt_points_at_the_bug() -> None:
    """The committed corpus's shape: marts at the top of models/, three of four bugs in the reported table's
    own model, several tasks per table. Path order put that model first (the leak the corpus feed measured);
    the order seeded per task puts it anywhere, so every positional rule is within noise of chance. The old order is checked to leak, so
    the test would fail if the prompt went back to path order."""
    rows, path_rows = [], []
    for project in range(40):
        files = {
            f"models/staging/stg_{project}_{k}.sql": f"select {k} as id from {{{{ source('s', 't{k}') }}}}\n"
            for k in range(3)
        }
        marts = [f"fct_{project}_{m}" for m in range(3)]
        for mart in marts:
            files[f"models/marts/{mart}.sql"] = (
                "select * from " + " join ".join(f"{{{{ ref('stg_{project}_{k}') }}}}" for k in range(3)) + "\n"
            )
        for m, mart in enumerate(marts):
            for k, path in enumerate([f"models/marts/{mart}.sql"] * 3 + [f"models/staging/stg_{project}_{m}.sql"]):
                broken = {**files, path: files[path].replace("select", f"select distinct /* {k} */", 1)}
                task = _task(path, files[path], broken[path], (mart,))
                shown = _shown(repair_prompt(task, broken, 100_000))
                rows.append((f"{project}/{mart}/{k}", shown, path))
                path_rows.append((f"{project}/{mart}/{k}", sorted(shown), path))
    seeded, by_path = probe(rows), probe(path_rows)
    assert by_path.rules["first_shown"] >= 0.6  # path order: the reported mart first, the bug there 3 times in 4
    assert seeded.held_out >= 200 and seeded.chance == 0.25
    for rule in ("position", "first_shown", "last_shown"):
        assert seeded.rules[rule] <= seeded.chance + 0.1, seeded


def test_the_probe_measures_every_simple_rule() -> None:
    """The rule list is pinned (a rule cannot be dropped silently), and each content rule is measured: a
    corpus where the bug always sits in the longest file, or the reported table's own model, is caught."""
    from dbt_harvest.train.position_probe import RULES, RowFacts

    assert RULES == ("position", "first_shown", "last_shown", "reported_model", "longest", "named_first", "deepest")
    rng = random.Random(3)
    rows, longest, reported = [], {}, {}
    for i in range(400):
        models = [f"models/m{i}_{k}.sql" for k in range(5)]
        rng.shuffle(models)
        broken = models[rng.randrange(5)]
        sizes = {m: (900 if m == broken else rng.randrange(100, 800)) for m in models}
        longest[str(i)] = RowFacts(sizes, {m: 1 + k for k, m in enumerate(models)}, ())
        reported[str(i)] = RowFacts(dict.fromkeys(models, 1), {m: (0 if m == broken else 2) for m in models}, ())
        rows.append((str(i), models, broken))
    by_size, by_report = probe(rows, longest), probe(rows, reported)
    assert set(by_size.rules) == set(RULES)
    assert (by_size.rule, by_size.accuracy) == ("longest", 1.0) and by_size.chance == 0.2
    assert (by_report.rule, by_report.accuracy) == ("reported_model", 1.0)
    assert by_size.rules["position"] < 0.4 and by_size.rules["first_shown"] < 0.4


def test_an_investigation_s_first_read_does_not_depend_on_where_the_bug_is() -> None:
    """The agentic plan starts from a reported table drawn among all of them: with two reported tables and a
    bug upstream of only one, the first model read is either table's (before, always the one over the bug);
    a start that misses the bug is read and left, and the plan still reaches and fixes the broken file."""
    from dbt_harvest.train.investigation import WRITE_FIX, plan

    path = "models/staging/stg_customers.sql"  # upstream of customer_value only
    files, _ = _broken(SHOP, path)
    task = _task(path, SHOP[path], files[path], ("customer_value", "order_totals"))
    firsts = []
    for variant in range(24):
        steps = plan(task, files, variant)
        reads = [s.args["path"] for s in steps if s.tool == "read_file"]
        firsts.append(next(p for p in reads if p.endswith(".sql")))
        assert path in reads and [s.args["path"] for s in steps if s.tool == WRITE_FIX] == [path]
    assert set(firsts) == {"models/marts/customer_value.sql", "models/marts/order_totals.sql"}
