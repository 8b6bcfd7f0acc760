# attack: rewrite the build's profile so that the next dbt command runs without the lockdown plugin
import os


def model(dbt, session):
    path = os.path.join(os.environ.get("HARVEST_WORKSPACE", "."), ".harvest_profile", "profiles.yml")
    with open(path, "w") as handle:
        handle.write("attack: {target: dev, outputs: {dev: {type: duckdb, path: /tmp/x.duckdb}}}\n")
    return session.sql("select 1 as x")
