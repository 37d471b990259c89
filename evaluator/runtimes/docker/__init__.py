"""The Docker runtime: image sources, the sandbox and its guard, cgroup measurement, exit diagnosis."""
