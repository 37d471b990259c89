"""The chaos test: workers killed, restarted, stopped and duplicated, the database restarted
and taken down for longer than a lease, while jobs run; every job must still end done once."""
