# attack: Python writes a file next to the harvester's data
def model(dbt, session):
    outside = dbt.config.get("outside")
    with open(f"{outside}/py_written.txt", "w") as handle:
        handle.write("pwned")
    return session.sql("select 1 as x")
