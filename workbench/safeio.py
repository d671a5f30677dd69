"""Files written so that nothing is ever lost, and the exit codes every command shares.

Every file the workbench writes goes through `atomic_write_*` or `atomic_writer`: the
bytes go to a temporary file in the same directory, are flushed and fsynced, then
`os.replace`d over the target (and the directory is fsynced), so a reader sees either the
old file or the whole new one, never a truncated one; a kill -9 or a full disk leaves the
old file untouched. `append_line` appends one whole line and fsyncs it, for resume logs
(a line cut by a crash is skipped by their readers).

>>> atomic_write_text("out.json", "{}")
>>> with atomic_writer("table.md") as f:
...     f.write("| a |\\n")
6
>>> open("out.json").read(), open("table.md").read()
('{}', '| a |\\n')

Exit codes of `sag2wb` (docs/reliability.md): 0 done; 1 the work failed (a judge error;
finished questions stay resumable); 2 bad input or environment, named in one line;
3 `--keep-going` finished with some questions failed (metrics cover the rest only);
130 interrupted (everything finished is kept for resume).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1  # the work could not be done (a question's judge failed); finished questions are resumable
EXIT_USAGE = 2  # bad input or environment, named in one line (file, DB, cache, option)
EXIT_PARTIAL = 3  # --keep-going: finished, but some questions failed; metrics cover the rest only
EXIT_INTERRUPTED = 130  # Ctrl-C: everything finished is kept for resume

TEMP_PREFIX = ".sag2wb-tmp-"


class InputError(ValueError):
    """Bad input or environment, said in one line that names the path and what to do;
    the CLI prints it and exits EXIT_USAGE. Engine modules raise it (they never import the CLI)."""


class OutputError(InputError):
    """A write we refuse (it would overwrite an input or a file that is not ours)."""


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not every platform opens directories; the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path, mode: str = "w", encoding: str | None = "utf-8"):
    """Yield a file object; on a clean exit its content replaces `path` atomically.
    On any exception the temporary file is removed and `path` is untouched."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX + path.name + ".", dir=directory)
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            # keep the permissions of the file we replace
            with contextlib.suppress(OSError):
                os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            with contextlib.suppress(OSError):
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        _fsync_dir(directory)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    with atomic_writer(path, "w", encoding) as f:
        f.write(text)


def atomic_write_bytes(path, data: bytes) -> None:
    with atomic_writer(path, "wb") as f:
        f.write(data)


def append_line(path, line: str) -> None:
    """Append one line (newline added) and fsync: a crash loses at most this line, and a
    reader skips a cut last line."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        # A previous crash may have left a cut line without its newline: start on a fresh line.
        if os.fstat(fd).st_size > 0:
            with open(path, "rb") as r:
                r.seek(-1, os.SEEK_END)
                if r.read(1) != b"\n":
                    data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def clean_stale_temps(directory, name: str | None = None) -> list[Path]:
    """Remove temporary files a killed writer left in `directory` (for `name`, or all)."""
    removed: list[Path] = []
    directory = Path(directory)
    if not directory.is_dir():
        return removed
    prefix = TEMP_PREFIX + (name + "." if name else "")
    for p in directory.iterdir():
        if p.name.startswith(prefix):
            with contextlib.suppress(OSError):
                p.unlink()
                removed.append(p)
    return removed


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (model checks, update manifests)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def same_file(a, b) -> bool:
    """True when two paths name the same existing file (hard links and symlinks included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_output(path, *, inputs=(), ours=None, force: bool = False, what: str = "--out") -> Path:
    """Refuse to write `path` when it is one of this command's `inputs`, or an existing file
    for which `ours(path)` is False (not a result we wrote); `force` allows the latter only.

    >>> atomic_write_text("q.jsonl", "{}\\n")
    >>> check_output("q.jsonl", inputs=["q.jsonl"])
    Traceback (most recent call last):
    ...
    workbench.safeio.OutputError: --out q.jsonl is an input of this command (q.jsonl); choose another file
    >>> check_output("results.jsonl", inputs=["q.jsonl"])
    PosixPath('results.jsonl')
    """
    path = Path(path)
    for inp in inputs:
        if inp is not None and Path(inp).exists() and path.exists() and same_file(path, inp):
            raise OutputError(f"{what} {path} is an input of this command ({inp}); choose another file")
    if path.is_dir():
        raise OutputError(f"{what} {path} is a directory; give a file path")
    if path.exists() and ours is not None and not force and not ours(path):
        raise OutputError(
            f"{what} {path} exists and is not a result written by sag2wb; "
            f"choose another path, or pass --force to replace it"
        )
    return path
