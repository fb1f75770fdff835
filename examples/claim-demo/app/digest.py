"""The digest task, in Python: once per fire, however many Jobs the fire gets.

The AppSchedule runs ``python3 /app/digest.py`` in the web image; every run carries its key. The claim
(appschedule_claim, on the app's own PostgreSQL) lets exactly one run of a fire write the digest: a
duplicate (a Job made by hand, a second controller, a rerun of a fire already done) claims nothing and
exits 0, and the operator reads what the claim came to from the pod's termination message.
"""

import os
import socket

import psycopg2

import appschedule_claim


def main() -> None:
    connection = psycopg2.connect(os.environ["DATABASE_URL"])
    try:
        with appschedule_claim.claim(connection, create=True) as claimed:
            if claimed.won:
                with connection.cursor() as cursor:
                    cursor.execute(
                        "INSERT INTO digests (task, key, host) VALUES (%s, %s, %s)",
                        (claimed.run.task, claimed.run.key, socket.gethostname()),
                    )
                connection.commit()
            print(f"{claimed.run.key}: {claimed.outcome}")
    finally:
        connection.close()


if __name__ == "__main__":
    main()
