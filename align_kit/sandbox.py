"""Sandboxed execution of model-written Python (seed 16.6, the `code_exec` tool of task=tool_calls).

`run_python(code)` runs the code in a separate process with a wall-clock timeout, a memory limit, no network, a
fresh working directory that is gone afterwards, and its output (stdout and stderr together) cut to a limit.

Two isolation modes (bwrap is probed once per process), named in `SandboxResult.isolation` and in one log line:
- bubblewrap (`bwrap` from Debian's `bubblewrap` package, found and working): new pid, network, ipc and uts
  namespaces; only /usr (and the interpreter's folder) bound read-only, a size-capped tmpfs as working directory
  and /tmp; run as uid 65534 when started as root so RLIMIT_NPROC caps forks (the kernel never applies it to root).
- process only (no working bwrap, or ALIGN_KIT_SANDBOX=process): a plain subprocess in its own session with
  rlimits and a fresh temporary directory as its working directory; it can still read and write whatever its user
  may and reach the network. A per-call supervisor (a child subreaper, see _RUNNER) kills and reaps every process
  the code started, however it detached (setsid, a double fork, an exec with a clean environment), at the
  deadline or when the code exits.
Either way every process of a call also carries a per-call token in its command line and environment, and a sweep
of /proc for it is the backstop when the pid namespace or the supervisor did not end the call on its own.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("align_kit")

STATUSES = ("ok", "crash", "timeout", "oom")
MODE_ENV = "ALIGN_KIT_SANDBOX"  # auto (default) | bwrap (required) | process (force the fallback)
# Processes one call may add on top of what its uid already runs: room for a pool of workers, not for a fork bomb.
MAX_PROCESSES = 32
SANDBOX_UID = 65534  # nobody
WORKDIR = "/sandbox"  # the working directory's path inside bubblewrap
TOKEN_ENV = "ALIGN_KIT_SANDBOX_TOKEN"  # also in the environment: it survives an exec that drops the command line
MAX_TIMEOUT_S = 24 * 3600  # a day: far beyond any tool call, and within what select() and RLIMIT_CPU take
MAX_MEMORY_MB = 2**20  # 1 TiB
OOM_EXIT = 86  # the runner's exit code for a MemoryError (an exit code no plain crash of Python uses)

TIMEOUT_EXIT = 87  # the supervisor's exit code when the wall clock ran out (also one no plain crash uses)
# How long past the deadline the supervisor gets to kill, reap and exit before run_python kills it (a backstop).
SUPERVISOR_GRACE_S = 2.0

# Runs inside the sandbox: reads the code from stdin, applies the limits from its arguments, then executes the code
# as __main__. Only trusted code runs before the limits are in force.
# In process mode it first becomes the call's supervisor, a child subreaper, so whatever the code starts and
# orphans (by a double fork, or a setsid and an exec that drops the token) is re-parented to it instead of to init.
# It forks the code off into its own process group (a killpg(0) of the code spares it), waits for it until the
# deadline (the caller's time.monotonic(), which is system-wide), then stops and kills every descendant it still
# has, reaps them all, and exits with the code's exit status (128 + N for a death by signal N, as bwrap reports it)
# or TIMEOUT_EXIT. Bubblewrap needs none of this: when it exits, its pid namespace dies with everything in it.
# prctl goes through ctypes' C core `_ctypes` (its dlopen, dlsym and call_function are in 3.11-3.13): the ctypes
# package builds some 30 type classes on import, 5-15 ms a call. Signals are numbers: importing `signal` (and enum
# with it) would cost more than the rest of the start-up.
_RUNNER = r"""
import os, resource, sys
_, token, supervise, deadline, mem, nproc, cpu, fsize = sys.argv
source = sys.stdin.read()
sys.stdin.close()
if supervise == "1":
    import select, time
    from _ctypes import call_function, dlopen, dlsym
    if call_function(dlsym(dlopen(None), "prctl"), (36, 1, 0, 0, 0)):  # PR_SET_CHILD_SUBREAPER
        raise OSError("prctl(PR_SET_CHILD_SUBREAPER) failed: nothing could promise to kill what the code detaches")
    child = os.fork()
    if child:
        def descendants():
            parent_of = {}
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        with open(f"/proc/{name}/stat", "rb") as f:
                            parent_of[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
                    except (OSError, IndexError, ValueError):
                        pass
            found, frontier = [], {os.getpid()}
            while frontier:
                frontier = {pid for pid, parent in parent_of.items() if parent in frontier}
                found += frontier
            return found
        code = TIMEOUT_EXIT
        try:
            if select.select([os.pidfd_open(child)], [], [], max(0.0, float(deadline) - time.monotonic()))[0]:
                code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
                code = 128 - code if code < 0 else code
        finally:  # whatever happened above, the sweep runs and the exit is this one (run_python relies on it)
            give_up = time.monotonic() + 5.0
            while time.monotonic() < give_up:
                try:
                    while os.waitpid(-1, os.WNOHANG)[0]:
                        pass
                except ChildProcessError:  # no child left, so no descendant either: the usual case, no sweep
                    break
                pids = descendants()
                for sig in (19, 9):  # SIGSTOP, then SIGKILL: a fork bomb cannot outrun the sweep
                    for pid in pids:
                        try:
                            os.kill(pid, sig)
                        except OSError:
                            pass
                time.sleep(0.001)
            os._exit(code)
    os.setpgid(0, 0)
for res, value in ((resource.RLIMIT_AS, int(mem)), (resource.RLIMIT_CPU, int(cpu)),
                   (resource.RLIMIT_FSIZE, int(fsize)), (resource.RLIMIT_CORE, 0)):
    resource.setrlimit(res, (value, value))
if int(nproc) > 0:
    resource.setrlimit(resource.RLIMIT_NPROC, (int(nproc), int(nproc)))
sys.argv = ["main.py"]
try:
    exec(compile(source, "main.py", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as error:  # the traceback without this runner's frame, as plain `python main.py` prints it
    status = OOM_EXIT if isinstance(error, MemoryError) else 1
    try:  # printing may itself run out of memory: the exit status stands regardless
        import linecache, traceback  # only here: together they are most of the runner's start-up time
        linecache.cache["main.py"] = (len(source), None, source.splitlines(True), "main.py")  # quote the code
        traceback.print_exception(error.with_traceback(error.__traceback__.tb_next))
    finally:
        sys.exit(status)
""".replace("OOM_EXIT", str(OOM_EXIT)).replace("TIMEOUT_EXIT", str(TIMEOUT_EXIT))


@dataclass
class SandboxResult:
    status: str  # "ok" | "crash" | "timeout" | "oom"
    output: str  # stdout and stderr together, cut to output_limit characters
    isolation: str  # one line: which isolation was in force


def run_python(code: str, *, timeout_s: float = 5.0, memory_mb: int = 256, output_limit: int = 4096) -> SandboxResult:
    """Run `code` as `python -I -S` (the caller's interpreter, standard library only: no site-packages, whose .pth
    imports tripled the start-up time) in a sandbox; nothing it started is alive when this returns."""
    _check_limits(timeout_s, memory_mb, output_limit)
    timeout_s, memory_mb, output_limit = float(timeout_s), int(memory_mb), int(output_limit)  # numpy's become ours
    deadline = time.monotonic() + timeout_s
    mode = isolation_mode()
    token = f"align_kit_sandbox-{uuid.uuid4().hex}"
    limit_bytes = memory_mb * 1024 * 1024
    cpu_s = math.ceil(timeout_s) + 1  # a backstop only: the wall clock decides
    run_uid = _run_uid(mode)
    nproc = _enforceable_nproc(run_uid)
    supervised = mode == "process"
    runner_args = [token, str(int(supervised)), repr(deadline), *map(str, (limit_bytes, nproc, cpu_s, limit_bytes))]
    tmp = None
    if mode == "bwrap":
        argv, cwd = _bwrap_argv(runner_args, limit_bytes), None
    else:
        tmp = tempfile.mkdtemp(prefix="align_kit_sandbox_")
        argv, cwd = [_interpreter(), "-I", "-S", "-u", "-c", _RUNNER, *runner_args], tmp
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": cwd or WORKDIR, "TMPDIR": cwd or "/tmp"}
    env[TOKEN_ENV] = token
    try:
        status, output = _execute(argv, cwd, env, code, deadline, supervised, output_limit, token)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return SandboxResult(status, output, _describe(mode, run_uid, nproc, memory_mb))


def _check_limits(timeout_s, memory_mb, output_limit) -> None:
    """One ValueError naming the argument: a NaN deadline would never pass, infinity overflows the CPU rlimit, a
    float memory size breaks the byte count, and True is not a number of anything."""
    wrong = []
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not 0 < timeout_s <= MAX_TIMEOUT_S:
        wrong.append(f"timeout_s={timeout_s!r} (set a number of seconds > 0 and <= {MAX_TIMEOUT_S})")
    for name, value, low, high in (("memory_mb", memory_mb, 1, MAX_MEMORY_MB), ("output_limit", output_limit, 0, None)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low or high and value > high:
            wrong.append(f"{name}={value!r} (set an integer >= {low}" + (f" and <= {high})" if high else ")"))
    if wrong:
        raise ValueError(f"run_python: {'; '.join(wrong)}")


def isolation() -> str:
    """The line `run_python` would report now (without running anything but bwrap's one-time probe)."""
    return _summary(_select_mode()[0])


def isolation_mode() -> str:
    """'bwrap' or 'process' for this call; the first call of each mode logs which isolation is in force."""
    mode, wanted = _select_mode()
    if mode not in _LOGGED:
        _LOGGED.add(mode)
        line = f"sandbox isolation: {_summary(mode)}"
        if mode == "bwrap":
            log.info(line)
        else:
            log.warning(line + (f" (bubblewrap: {_BWRAP_PROBE['why']})" if wanted == "auto" else ""))
    return mode


def _select_mode() -> tuple[str, str]:
    wanted = os.environ.get(MODE_ENV, "auto")
    if wanted not in ("auto", "bwrap", "process"):
        raise ValueError(f"{MODE_ENV}={wanted!r}: use auto, bwrap or process")
    mode = "process" if wanted == "process" else ("bwrap" if _bwrap_works() else "process")
    if wanted == "bwrap" and mode != "bwrap":
        raise RuntimeError(f"{MODE_ENV}=bwrap but bubblewrap does not run here: {_BWRAP_PROBE['why']}")
    return mode, wanted


_LOGGED: set[str] = set()
_BWRAP_PROBE: dict = {}


def _bwrap_works() -> bool:
    """Whether bwrap exists and can create the namespaces we ask for (some containers forbid it); probed once."""
    if "ok" not in _BWRAP_PROBE:
        exe = shutil.which("bwrap")
        if exe is None:
            _BWRAP_PROBE.update(ok=False, why="no bwrap on PATH (install Debian's bubblewrap: make install-sandbox)")
        else:
            probe = subprocess.run(
                [exe, *_bwrap_namespaces(), "--ro-bind", "/", "/", "true"], capture_output=True, text=True, timeout=30
            )
            why = probe.stderr.strip().splitlines()[-1:] or [f"exit {probe.returncode}"]
            _BWRAP_PROBE.update(ok=probe.returncode == 0, why=f"bwrap probe failed: {why[0]}")
    return _BWRAP_PROBE["ok"]


def _bwrap_namespaces() -> list[str]:
    flags = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    # As root bwrap needs no user namespace, and we leave it out so the sandbox can drop to a uid that
    # RLIMIT_NPROC binds; as any other user it is what lets bwrap create the others.
    return flags if os.geteuid() == 0 else ["--unshare-user", *flags]


def _run_uid(mode: str) -> int:
    """The host uid the code runs as: bwrap started by root switches to nobody with setpriv (util-linux)."""
    if mode == "bwrap" and os.geteuid() == 0 and shutil.which("setpriv"):
        return SANDBOX_UID
    return os.geteuid()


def _interpreter() -> str:
    # The real binary, not a venv's link: inside the sandbox only the base installation is bound.
    return os.path.realpath(sys.executable)


def _bwrap_argv(runner_args: list[str], limit_bytes: int) -> list[str]:
    python = _interpreter()
    argv = [shutil.which("bwrap"), *_bwrap_namespaces(), "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    # Folders bwrap makes for a bind copy the host's modes (/root is 0700): make them searchable for uid 65534.
    argv += ["--perms", "0755", "--dir", "/etc", "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    prefix = Path(sys.base_prefix).resolve()
    if not prefix.is_relative_to("/usr"):
        for parent in reversed(prefix.parents[:-1]):
            argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", str(prefix), str(prefix)]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for path in ("/tmp", WORKDIR):
        argv += ["--perms", "1777", "--size", str(limit_bytes), "--tmpfs", path]
    argv += ["--chdir", WORKDIR]
    command = [python, "-I", "-S", "-u", "-c", _RUNNER, *runner_args]
    if _run_uid("bwrap") != os.geteuid():
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]  # setpriv's only use of root, then dropped
        uid = str(SANDBOX_UID)
        setpriv = shutil.which("setpriv")
        command = [setpriv, "--reuid", uid, "--regid", uid, "--clear-groups", "--no-new-privs", "--", *command]
    return [*argv, "--", *command]


def _enforceable_nproc(uid: int) -> int:
    """RLIMIT_NPROC counts every process of the uid, so the cap is what it already runs plus MAX_PROCESSES;
    0 (no limit) for root, which the kernel exempts anyway."""
    if uid == 0:
        return 0
    owned = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                owned += entry.stat().st_uid == uid
            except OSError:
                pass
    return owned + MAX_PROCESSES


def _summary(mode: str) -> str:
    uid = _run_uid(mode)
    return _describe(mode, uid, int(uid != 0), None)


def _describe(mode: str, run_uid: int, nproc: int, memory_mb: int | None) -> str:
    memory = f"RLIMIT_AS {memory_mb} MiB" if memory_mb else "RLIMIT_AS"
    forks = f"RLIMIT_NPROC +{MAX_PROCESSES} processes" if nproc else "no process cap (root: RLIMIT_NPROC not applied)"
    if mode == "bwrap":
        who = "uid 65534" if run_uid == SANDBOX_UID else f"uid {run_uid} in a user namespace"
        if run_uid == 0:
            who = "uid 0 without capabilities (no setpriv)"
        return (
            f"bubblewrap: new pid/net/ipc/uts namespaces, read-only /usr, tmpfs {WORKDIR} and /tmp, {who}, "
            f"{memory}, {forks}, wall-clock kill of every process"
        )
    return (
        f"process only: same user (uid {run_uid}), own session, fresh temp working directory, {memory}, {forks}, "
        "a subreaper supervisor's wall-clock kill of every process; NO filesystem or network isolation"
    )


def _execute(
    argv: list[str],
    cwd: str | None,
    env: dict,
    code: str,
    deadline: float,
    supervised: bool,
    output_limit: int,
    token: str,
) -> tuple[str, str]:
    source = code.encode("utf-8", "surrogatepass")  # before the process exists: nothing may raise in between
    oom_kills = _oom_kills()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output = _Output(proc.stdout.fileno(), keep=output_limit * 4)  # bytes enough for output_limit characters
    exited = False
    try:
        try:
            proc.stdin.write(source)
            proc.stdin.close()
        except BrokenPipeError:  # it died before reading its code; the exit status says why
            pass
        # One thread, no polling: a pidfd turns readable when the process exits (Popen.wait(timeout) sleeps up to
        # 50 ms a turn), and the pipe is drained meanwhile so the code never blocks on a full one. A supervisor
        # keeps the deadline itself: waiting for it longer is a backstop for one that the code stopped.
        with os.fdopen(os.pidfd_open(proc.pid), "rb", buffering=0) as pidfd:
            exited = output.read_until(pidfd.fileno(), deadline + (SUPERVISOR_GRACE_S if supervised else 0.0))
    finally:
        # A supervisor that exited on its own has killed and reaped everything (or never forked: its own start-up
        # failed); otherwise kill its group and sweep for the token (what a killed supervisor left to init keeps
        # it, unless it dropped it). Not reaped before proc.wait() below, so the group's id is still ours.
        if not (supervised and exited and _exited_on_its_own(proc.pid)):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _kill_all(token)
        returncode = proc.wait()
    output.read_until(None, time.monotonic() + 1.0)  # what is left in the pipe; every writer is gone
    proc.stdout.close()
    text = output.kept.decode("utf-8", errors="replace")[:output_limit]
    # The supervisor reports the code's death by signal N as 128 + N (and bwrap passes that on); -N from Popen is
    # the supervisor's own.
    died_of = -returncode if returncode < 0 else returncode - 128 if returncode > 128 else 0
    if not exited or (supervised and returncode == TIMEOUT_EXIT) or died_of == signal.SIGXCPU:
        return "timeout", text
    if returncode == 0:
        return "ok", text
    if returncode == OOM_EXIT:
        return "oom", text
    # A SIGKILL we did not send is the kernel's OOM killer only if it killed something meanwhile: code can SIGKILL
    # itself (os.kill(os.getpid(), 9)), and that is a crash.
    if died_of == signal.SIGKILL and oom_kills is not None and (_oom_kills() or 0) > oom_kills:
        return "oom", text
    return "crash", text


def _oom_kills() -> int | None:
    """The kernel's count of processes its OOM killer has killed since boot (/proc/vmstat's oom_kill, Linux 4.13+);
    None where it is not readable."""
    try:
        with open("/proc/vmstat", "rb") as handle:
            for line in handle:
                if line.startswith(b"oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _exited_on_its_own(pid: int) -> bool:
    """Whether the exited (not yet reaped) process called exit rather than died of a signal; it stays unreaped."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT).si_code == os.CLD_EXITED


class _Output:
    """The head of a pipe's bytes (up to `keep`); the rest is read and dropped."""

    def __init__(self, fd: int, keep: int):
        self.fd, self.keep, self.kept, self.eof = fd, keep, bytearray(), False

    def read_until(self, exit_fd: int | None, deadline: float) -> bool:
        """Read until `exit_fd` is readable (True), or end of file with no `exit_fd`, or the deadline (False)."""
        with selectors.DefaultSelector() as selector:
            if not self.eof:
                selector.register(self.fd, selectors.EVENT_READ)
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ)
            while (remaining := deadline - time.monotonic()) > 0 and selector.get_map():
                for key, _ in selector.select(remaining):
                    if key.fd == exit_fd:
                        return True
                    chunk = os.read(self.fd, 65536)
                    self.kept.extend(chunk[: max(0, self.keep - len(self.kept))])
                    if not chunk:
                        self.eof = True
                        selector.unregister(self.fd)
        return False


def _kill_all(token: str) -> None:
    """Kill every process carrying the call's token (also those that left its process group, or live in bwrap's pid
    namespace); stop them all before killing so a fork bomb cannot outrun the sweep."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        pids = _pids_with(token.encode())
        if not pids:
            return
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(0.01)
    log.warning(f"sandbox: processes {_pids_with(token.encode())} of {token} still alive after 5 s of SIGKILL")


def _pids_with(token: bytes) -> list[int]:
    """Processes whose command line or environment holds the token (a zombie's are empty: it is dead already)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            for part in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{entry.name}/{part}", "rb") as f:
                        if token in f.read():
                            pids.append(int(entry.name))
                            break
                except OSError:
                    pass
    return pids
