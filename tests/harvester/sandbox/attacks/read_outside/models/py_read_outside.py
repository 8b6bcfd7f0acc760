# attack: plain Python file access, which no DuckDB setting can stop
def model(dbt, session):
    outside = dbt.config.get("outside")
    with open(f"{outside}/secret.txt") as handle:
        stolen = handle.read()
    return session.sql("select ? as stolen", params=[stolen])
