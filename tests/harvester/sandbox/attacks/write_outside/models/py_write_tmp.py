# attack: Python drops a file in /tmp, hoping the host shares it
def model(dbt, session):
    with open(dbt.config.get("marker"), "w") as handle:
        handle.write("pwned")
    return session.sql("select 1 as x")
