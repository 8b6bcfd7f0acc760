# attack: resolve a public name (the first step of any exfiltration)
import socket


def model(dbt, session):
    address = socket.getaddrinfo("pypi.org", 443)[0][4][0]
    return session.sql("select ? as address", params=[address])
