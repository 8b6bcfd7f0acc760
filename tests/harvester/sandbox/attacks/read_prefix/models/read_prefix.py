# attack: read a file that sits in the Python interpreter's installation folder, beside (not inside)
# the standard library and site-packages: a pyenv or conda install in the home folder holds other
# environments and user files there. The test puts a canary file at the path it passes in.
def model(dbt, session):
    path = dbt.config.get("canary")
    try:
        with open(path) as handle:
            seen = handle.read().strip()
    except OSError as exc:
        seen = "refused: " + type(exc).__name__
    return session.sql(f"select '{seen}' as seen")
