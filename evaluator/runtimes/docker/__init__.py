"""The Docker runtime, one concern a module: ``runtime`` (the model container's lifecycle),
``sandbox`` (network, guard, labels, leftovers), ``images`` (image sources) and ``tarballs``
(bounded tarball checks), ``cgroups`` (memory and pids readings), ``exits`` (why a model
died), ``engine_faults`` (whose fault a Docker error is), ``references`` (registry names)."""
