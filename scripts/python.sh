# Sourced by the scripts: which Python they use.
#
# $PYTHON when set; else ./.venv/bin/python when set-up made one; else python3. Set-up makes
# ./.venv when the chosen python3 is Debian's own, which refuses `pip install` into the
# system (PEP 668, "externally-managed-environment").

choose_python() {
    if [[ -n "${PYTHON:-}" ]]; then
        printf '%s\n' "$PYTHON"
    elif [[ -x .venv/bin/python ]]; then
        printf '%s\n' "$PWD/.venv/bin/python"
    else
        printf '%s\n' python3
    fi
}

# True when pip may not install into this interpreter: a system Python marked
# EXTERNALLY-MANAGED, and not a virtual environment.
externally_managed() {
    "$1" - <<'PY'
import os, sys, sysconfig
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(marker) else 1)
PY
}
