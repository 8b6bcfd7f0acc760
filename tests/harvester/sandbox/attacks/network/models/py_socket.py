# attack: open a TCP connection to a server on the harvester's own loopback interface
import socket


def model(dbt, session):
    port = int(dbt.config.get("port"))
    with socket.create_connection(("127.0.0.1", port), timeout=3) as conn:
        conn.sendall(b"exfiltrated")
    return session.sql("select 1 as x")
