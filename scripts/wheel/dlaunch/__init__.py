"""dlaunch, the native launcher for distributed training, as a wheel.

pip installs the binary itself as <prefix>/bin/dlaunch, so `dlaunch` on the
environment's PATH runs no Python at all. `python -m dlaunch ARGS` (and
`dlaunch.main()`) replace this Python process with that binary through
os.execv: no Python process stays between the user and the workers, and the
pid, the signals and the exit code are dlaunch's own.
"""
import os
import sys
import sysconfig

__all__ = ["binary_path", "main"]


def _candidates():
    # The scripts directory of the scheme pip installed into: the venv's or the
    # system's, the user's (pip install --user), or the prefix above this
    # package (pip install --prefix).
    yield sysconfig.get_path("scripts")
    user = getattr(sysconfig, "get_preferred_scheme", lambda _: "posix_user")("user")
    yield sysconfig.get_path("scripts", user)
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir, "bin")


def binary_path():
    """The installed dlaunch binary; FileNotFoundError naming where it looked."""
    tried = []
    for directory in _candidates():
        path = os.path.join(directory, "dlaunch")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        tried.append(os.path.normpath(directory))
    raise FileNotFoundError("the dlaunch binary is not installed (looked in %s)" % ", ".join(tried))


def main():
    """Runs the binary with this process's arguments, in this process's place."""
    try:
        path = binary_path()
    except FileNotFoundError as e:
        sys.stderr.write("dlaunch: %s\n" % e)
        sys.exit(127)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [path] + sys.argv[1:])
