"""The Docker runtime, one concern a module: ``runtime`` (the model container's lifecycle),
``sandbox`` (network, guard, labels, leftovers), ``reaper`` (removing runs nobody owns),
``objects`` (race-tolerant listing and removal), ``self_container`` (an evaluator that runs
in a container joins each run's network), ``images`` (image sources) and ``tarballs``
(bounded tarball checks), ``cgroups`` (memory and pids readings), ``exits`` (why a model
died), ``engine_faults`` (whose fault a Docker error is), ``references`` (registry names)."""
