# attack: write 1.5 GiB into /harvest-fill, a place in RAM outside the workspace, /tmp and the memory bound
# (bubblewrap's own /dev is a tmpfs of half the host's RAM; its / is a writable tmpfs). Reports how many
# MiB went in and why it stopped.
def model(dbt, session):
    written, reason = 0, "all written"
    chunk = b"x" * (1 << 20)
    try:
        with open("/harvest-fill", "wb") as handle:
            for _ in range(1536):
                handle.write(chunk)
                handle.flush()
                written += 1
    except OSError as exc:
        reason = type(exc).__name__ + ": " + (exc.strerror or str(exc))
    return session.sql(f"select {written} as mib, '{reason.replace(chr(39), '')}' as reason")
