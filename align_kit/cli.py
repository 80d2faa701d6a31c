"""`align-kit <command> ...`. Imports nothing heavy at module level, so --help and --cfg are fast."""

from __future__ import annotations

import sys

USAGE = """usage: align-kit <command> [args]

commands:
  train     run an experiment: align-kit train [hydra overrides]   (align-kit train --help)
            e.g. align-kit train clip=clip_higher trainer.max_steps=50
                 align-kit train recipe=dapo
                 align-kit train -m clip=symmetric,clip_higher seed=1,2,3
  sweep     run an ablation from sweeps/: align-kit sweep <name> [hydra overrides]
            (the same as align-kit train -m sweep=<name> ...; names: the files in sweeps/)
            e.g. align-kit sweep clip_higher
                 align-kit sweep overlong seed=1,2,3,4,5
            align-kit sweep --status <sweep folder>   each job's status (pending, running, done, failed)
            align-kit sweep --resume <sweep folder>   skip finished jobs, resume stopped ones, rerun failed ones
  vllm-serve  serve the policy a run would train with vLLM (TRL's trl vllm-serve), for rollout.mode=server:
            align-kit vllm-serve [the run's hydra overrides]
  compare   compare runs by arm over seeds: tables, figures, report.md   (align-kit compare --help)
            e.g. align-kit compare outputs/sweeps/<time>
                 align-kit compare run_a run_b --metrics reward,entropy --smooth 5
                 align-kit compare wandb:ENTITY/PROJECT/GROUP
  doctor    diagnose a GRPO run from its logs (align_kit, TRL, verl, OpenRLHF, W&B, CSV/JSONL): verdict,
            timeline, advice in the run's framework's terms; exit 0 healthy, 1 warning, 3 failing, 2 bad input
            e.g. align-kit doctor outputs/my_run
                 align-kit doctor trainer_state.json --json
                 align-kit doctor slurm-1234.out --figures doctor/
                 align-kit doctor --follow outputs/my_run/metrics.jsonl --idle 300
"""


# The exit statuses a shell gives a process that SIGPIPE or SIGINT ended (128 + the signal's number).
PIPE_CLOSED = 141
INTERRUPTED = 130


class ReaderGone(BaseException):
    """stdout's reader went away. A BaseException, as KeyboardInterrupt is: Hydra's error report and a sweep job's
    `except Exception` would otherwise print a traceback or record a failed job for what is no fault of the run."""


class _GuardedStdout:
    """sys.stdout for the command's duration, turning the write that finds the pipe closed into ReaderGone."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise ReaderGone from None

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise ReaderGone from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args[0] if args else "help"
    stdout = sys.stdout
    sys.stdout = _GuardedStdout(stdout)
    try:
        try:
            _dispatch(args)
        finally:
            sys.stdout.flush()  # inside the try: a reader gone (`| head`) fails here, not at interpreter exit
    except (ReaderGone, BrokenPipeError):
        _stop_on_closed_pipe(stdout)
    except KeyboardInterrupt:
        _stop_on_interrupt(command)
    finally:
        sys.stdout = stdout


def _stop_on_closed_pipe(stdout) -> None:
    """The reader of a pipe stopped reading: no traceback, and the status of a process SIGPIPE ended, since not all
    was delivered. stdout points at /dev/null so Python's own flush at exit cannot fail again."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stream without a file descriptor (a test's capture)
        pass
    sys.exit(PIPE_CLOSED)


def _stop_on_interrupt(command: str) -> None:
    """Ctrl-C anywhere outside training's own handler (start-up, imports, pre-flight, loading, reading runs): one
    line and 130. A further Ctrl-C while this line is written is ignored, so it cannot end in a traceback."""
    import contextlib
    import signal

    with contextlib.suppress(ValueError):  # only the main thread may set a handler
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    print(f"align-kit {command}: interrupted (Ctrl-C); stopped at once", file=sys.stderr)
    sys.exit(INTERRUPTED)


def _dispatch(args: list[str]) -> None:
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return
    command, rest = args[0], args[1:]
    if command == "train":
        _train(rest)
        return
    if command == "sweep":
        _run_sweep(rest)
        return
    if command == "vllm-serve":
        from align_kit.vllm_server import main as serve

        serve(rest)
        return
    if command == "compare":
        from align_kit.compare.command import main as compare

        compare(rest)
        return
    if command == "doctor":
        from align_kit.doctor.command import main as doctor

        doctor(rest)
    print(f"align-kit: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    sys.exit(2)


def _run_sweep(rest: list[str]) -> None:
    from align_kit.sweep import main as sweep

    sweep(rest)


def _train(argv: list[str]) -> None:
    """Validate every job first (a bad config exits 2 and leaves no folder), then let Hydra run them."""
    from align_kit.runs.preflight import flags_first, run_preflight

    argv = flags_first(argv)  # Hydra's parser wants its flags before the overrides; a user may put them anywhere
    run_preflight(argv)
    from align_kit import train

    sys.argv = ["align-kit train", *argv]
    train.main()


if __name__ == "__main__":
    main()
