# Sourced by the test scripts. use_debian_python DIR: `python3` is Debian's
# /usr/bin/python3 for this shell and everything it runs (DIR, first on PATH,
# holds just that link) when another python3 comes first. The tests' Python
# modules are Debian packages installed for it, and a version manager's shim
# (pyenv's) cost half a second of CPU per call: minutes over the suite.
use_debian_python() {
  [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ] || return 0
  mkdir -p "$1" && ln -sf /usr/bin/python3 "$1/python3" && export PATH="$1:$PATH"
}
