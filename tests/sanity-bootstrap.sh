#!/usr/bin/env bash
# ansible-test bootstraps pip in its per-test virtual environments with a get-pip script that it
# downloads from a host this machine cannot reach; it looks in its cache first. This stand-in,
# put in that cache, bootstraps pip from the interpreter's own ensurepip and installs the
# requested packages from PyPI (lab-notes.md, "ansible-test here").
set -euo pipefail
at_dir=$(python -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')
pip_version=$(sed -n "s/^ *pip='\([0-9.]*\)',/\1/p" "$at_dir/_internal/python_requirements.py" | head -n1)
[[ -n "$pip_version" ]] || { echo "cannot find the pip version ansible-test bootstraps" >&2; exit 1; }
mkdir -p "$HOME/.ansible/test/cache"
for v in $pip_version; do
  cat > "$HOME/.ansible/test/cache/get_pip_${v//./_}.py" <<'PY'
"""Stand-in for get-pip.py: ensurepip, then pip install of the given arguments."""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"],
                      stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
PY
done
