"""The launcher: what the fresh interpreter runs inside the sandbox, before and around the code.

It is the sandbox's side of the token protocol; supervisor.py reads the other side. Kept as source text
and passed with `-c`: inside the sandbox this package's files are not there to import (strict mounts none of
the repository, and `-S -s` leaves no site-packages).
"""

from __future__ import annotations

# Runs in the fresh interpreter (-S -s, our allow-listed environment) inside the sandbox, then runs the code
# in the same process: one interpreter start per run, not two (the start is most of a short run's cost).
# Order matters: limits first (they bound the compile too), then the uid switch (it needs CAP_SETUID, lost
# right after), then compile, then the code. The token is read into one mutable buffer, written without
# copies (writev) and zeroed before the code runs, so the code cannot find it in memory; the supervisor also
# trusts no token line that comes after "ready".
_LAUNCHER = r"""
import os, sys
c = eval(sys.argv[1], {"__builtins__": {}})  # our own repr() of literals; json would cost 14 ms of imports
token = bytearray(32)
os.readv(c["token_fd"], [token])
os.close(c["token_fd"])
def say(word, text=""):
    os.writev(2, [token, (" %s %s\n" % (word, text.replace("\n", " "))).encode()])
try:
    import resource
    for name, soft, hard in c["rlimits"]:
        try:
            resource.setrlimit(getattr(resource, name), (soft, hard))
        except (ValueError, OSError):
            if c["strict_rlimits"]:
                raise
    if c["nnp"]:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if c["uid"] is not None:
        uid = c["uid"]
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    with open(c["path"], "rb") as handle:
        source = handle.read()
except BaseException as error:
    say("sandbox_error", repr(error))
    os._exit(70)
say("start")
try:
    code = compile(source, c["path"], "exec", dont_inherit=True)
except BaseException as error:
    say("compile_error")
    import traceback
    sys.stderr.write("".join(traceback.format_exception_only(type(error), error)))
    sys.stderr.flush()
    os._exit(1)
try:
    # What `python -s solution.py` gives a script, bar .pth files: exit() and quit(), help(), the base
    # interpreter's site-packages on sys.path (the script's folder is not: PYTHONSAFEPATH), a fresh
    # __main__, and sys.argv / sys.orig_argv naming the script.
    import builtins, site, types
    site.setquit()
    site.sethelper()
    sys.path.extend(p for p in site.getsitepackages() if p not in sys.path)
    main = types.ModuleType("__main__")
    main.__file__ = c["path"]
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    sys.argv = [c["path"]]
    sys.orig_argv = [sys.executable, "-S", "-s", c["path"]]
    def hook(kind, value, tb, shown=sys.__excepthook__):
        while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
            tb = tb.tb_next  # this launcher's frame: not the code's
        shown(kind, value.with_traceback(tb), tb)  # the display reads __traceback__
    sys.excepthook = hook
except BaseException as error:
    say("sandbox_error", "setup: " + repr(error))
    os._exit(70)
say("ready")
token[:] = bytes(len(token))
os.closerange(3, 65536)
finalize = c["finalize"]
del c, source, token, say, hook, handle, types
exec(code, main.__dict__)
if not finalize:
    # The code ended normally: do what the interpreter's exit does first (join threads, run atexit
    # handlers, flush stdio), then skip its teardown of every module (7 ms once typing is imported).
    import atexit
    if "threading" in sys.modules:
        sys.modules["threading"]._shutdown()
    atexit._run_exitfuncs()
    status = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = 120  # what Python exits with when flushing stdio fails at exit
    os._exit(status)
"""
