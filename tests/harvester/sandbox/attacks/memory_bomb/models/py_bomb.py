# attack: Python keeps allocating and touching memory until something stops it
def model(dbt, session):
    hoard = []
    while len(hoard) < 1_000_000:
        hoard.append(bytearray(64 << 20))
    return session.sql("select count(*) as chunks from range(1)")
