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

Every command that writes declares its inputs and outputs in an `Outputs` and checks them
all before any work (the CLI's main does it for each command's `declare_io(args, io)`;
docs/reliability.md, "Outputs"). An output is refused when it is an input, another output
of the same command, a resume file, a folder where a file is meant (or the reverse), or an
existing file that is not ours unless `force`; the message names the option the user gave
and the user's path. A file is ours by provenance, never by its look: a writer passes
`record="eval --out"` to `atomic_writer` (or calls `record_output`), which keeps the file's
name, size and sha256 in the folder's `.sag2wb-outputs.jsonl` before the file appears;
`ours(path)` is true only while the file still has a recorded size and sha256:

>>> atomic_write_text("mine.trec", "q1 Q0 d1 1 1.0 mine\\n")               # the user's, unrecorded
>>> atomic_write_text("ours.trec", "q1 Q0 d1 1 1.0 sag2\\n", record="eval --run")
>>> ours("mine.trec"), ours("ours.trec")
(False, True)

>>> atomic_write_text("q.jsonl", "{}\\n")
>>> io = Outputs(force=False)
>>> io.input("--questions", "q.jsonl")
>>> io.output("--out", "result.json")
PosixPath('result.json')
>>> io.resume("--out", "result.json.partial.jsonl")
>>> io.output("--run", "result.json.partial.jsonl")
PosixPath('result.json.partial.jsonl')
>>> io.check()
Traceback (most recent call last):
...
workbench.safeio.OutputError: --run result.json.partial.jsonl is the resume file of --out; choose another file
>>> check_name("--split", "../../victim")
Traceback (most recent call last):
...
workbench.safeio.OutputError: --split '../../victim': give a plain name (no '/', '..', absolute path or NUL)

A new `sag2wb` command that writes: add each path option with
`workbench.cli.io_roles.path_option(p, "--out", role="output", help=...)` (`role="input"` for
what it reads), give its module `def declare_io(args, io): io.input("--db", args.db);
io.output("--out", args.out)`, and write with `atomic_write_text(out, text, record="mycmd --out")`
so that a rerun may replace it. The CLI's main calls `declare_io` and `io.check()`
before the command runs (the command finds `args.io`), and refuses to run a command whose
given output option was not declared; tests/test_outputs.py fails on a path-like option
without a role.

Exit codes of `sag2wb` (docs/reliability.md): 0 done; 1 the work failed (a judge error;
finished questions stay resumable); 2 bad input or environment, named in one line;
3 `--keep-going` finished with some questions failed (metrics cover the rest only);
130 interrupted (everything finished is kept for resume).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1  # the work could not be done (a question's judge failed); finished questions are resumable
EXIT_USAGE = 2  # bad input or environment, named in one line (file, DB, cache, option)
EXIT_PARTIAL = 3  # --keep-going: finished, but some questions failed; metrics cover the rest only
EXIT_INTERRUPTED = 130  # Ctrl-C: everything finished is kept for resume

TEMP_PREFIX = ".sag2wb-tmp-"
OUTPUTS_RECORD = ".sag2wb-outputs.jsonl"  # per folder: the files sag2wb wrote there (name, size, sha256, by)


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
def atomic_writer(path, mode: str = "w", encoding: str | None = "utf-8", *, record: str | None = None):
    """Yield a file object; on a clean exit its content replaces `path` atomically.
    On any exception the temporary file is removed and `path` is untouched. `record` (what
    writes it, e.g. "eval --out"): the new content's size and sha256 are recorded as ours
    (`record_output`) before the rename, so a kill between the two leaves no unrecorded file."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX + path.name + ".", dir=directory)
    try:
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if record is not None:
            _record(path, record, os.path.getsize(tmp), file_sha256(tmp))
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
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and (exc.filename is None or str(exc.filename) == tmp):
            exc.filename = str(path)  # name the user's file, never our temporary one (a write's ENOSPC has none)
        raise


def atomic_write_text(path, text: str, encoding: str = "utf-8", *, record: str | None = None) -> None:
    with atomic_writer(path, "w", encoding, record=record) as f:
        f.write(text)


def atomic_write_bytes(path, data: bytes, *, record: str | None = None) -> None:
    with atomic_writer(path, "wb", record=record) as f:
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


def read_json(path, what: str | None = None):
    """A JSON file's value, or an `InputError` naming the file and what is wrong: unreadable,
    not UTF-8, not JSON (with line and column), nested too deeply for Python's parser, or a
    number too long to read (Python's int-digit limit). `what` names the file's role in
    the message (e.g. "--judge learned:J.json").

    >>> atomic_write_text("deep.json", "[" * 100000 + "]" * 100000)
    >>> read_json("deep.json", "model file")
    Traceback (most recent call last):
    ...
    workbench.safeio.InputError: model file deep.json: JSON nested too deeply to read; ...
    """
    name = f"{what} {path}" if what else str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{name}: not UTF-8 text; give a JSON file") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read it ({exc.strerror or exc})") from None
    return parse_json(text, name)


def parse_json(text: str, name: str):
    """`json.loads(text)`, with every failure an `InputError` that starts with `name`."""
    import json

    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{name}: JSON nested too deeply to read; give a file as sag2wb writes it") from None
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise InputError(f"{name}: a value cannot be read ({exc}); give a file as sag2wb writes it") from None


def file_sha256(path) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks (model checks, update manifests)."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ---- provenance: a file is ours when we recorded writing it ---------------------------------------
_RECORD_HEADER = '{"sag2wb": "outputs", "version": 1}'
_COMPACT_AT = 4 << 20  # a record longer than this is rewritten with the live entries only


@dataclass
class Records:
    """A folder's record of the files sag2wb wrote there: name -> {(size, sha256)}. `problem`:
    why the record cannot be trusted (then nothing in the folder is ours). A line that is not a
    record (cut by a crash, edited) is skipped: it can only make fewer files ours."""

    folder: Path
    files: dict[str, set[tuple[int, str, str]]]  # name -> {(size, sha256, what wrote it)}
    stats: dict[str, str] = field(default_factory=dict)  # repr([name, size, [mtime, ctime, inode, dev], by]) -> sha256
    problem: str | None = None

    @property
    def path(self) -> Path:
        return self.folder / OUTPUTS_RECORD


def _folder_of(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _entry(line: str):
    import json

    try:
        e = json.loads(line)
    except (ValueError, RecursionError):
        return None
    ok = isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("sha256"), str)
    return e if ok and isinstance(e.get("size"), int) and not isinstance(e.get("size"), bool) else None


def read_records(folder) -> Records:
    """The record of `folder` (`OUTPUTS_RECORD`); missing: nothing there is ours."""
    rec = Records(Path(folder), {})
    path = rec.path
    if not os.path.lexists(path):
        return rec
    if path.is_symlink() or not path.is_file():
        rec.problem = "it is not a regular file"
        return rec
    try:
        with open(path, encoding="utf-8") as f:
            if f.readline(4096).rstrip("\n") != _RECORD_HEADER:
                rec.problem = f"its first line is not {_RECORD_HEADER}"
                return rec
            for line in f:
                e = _entry(line) if line.endswith("\n") else None
                if e is not None:
                    rec.files.setdefault(e["name"], set()).add((e["size"], e["sha256"], str(e.get("by"))))
                    rec.stats[repr([e["name"], e["size"], e.get("stat"), e.get("by")])] = e["sha256"]
    except UnicodeDecodeError:
        rec.problem = "it is not UTF-8 text"
    except OSError as exc:
        rec.problem = f"it cannot be read ({exc.strerror or exc})"
    return rec


def not_ours(path, records: Records | None = None, by: str | None = None) -> str | None:
    """Why the existing `path` is not a file sag2wb wrote (None: it is, byte for byte; `by`:
    and it was written by that, e.g. "eval --run", so one command never replaces another's file)."""
    path = Path(path)
    if path.is_symlink():
        return "it is a symbolic link; sag2wb writes only regular files"
    if not path.is_file():
        return "it is not a regular file"
    records = records if records is not None else read_records(_folder_of(path))
    if records.problem:
        return f"sag2wb's record of the files it wrote there, {records.path}, is damaged: {records.problem}"
    known = {(s, h) for s, h, b in records.files.get(path.name, set()) if by is None or b == by}
    if not known and records.files.get(path.name):
        others = sorted({b for _, _, b in records.files[path.name]})
        return f"sag2wb wrote it as {' and '.join(others)}, not as {by}"
    if not known:
        return f"not recorded as written by sag2wb in {records.path}"
    st = path.stat()  # the stat recorded with a sha256 (record_output) spares reading the file, as git does
    stat, hashes = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev], {h for s, h in known if s == st.st_size}
    if not hashes or (records.stats.get(repr([path.name, st.st_size, stat, by])) or file_sha256(path)) not in hashes:
        return "it was changed after sag2wb wrote it, so it is yours now"
    return None


def ours(path, by: str | None = None) -> bool:
    """True when `path` is a regular file whose size and sha256 are in its folder's record.

    >>> atomic_write_text("x.json", "{}", record="example")
    >>> ours("x.json"), atomic_write_text("x.json", "{ }"), ours("x.json")   # rewritten without a record
    (True, None, False)
    """
    return not_ours(path, by=by) is None


@contextlib.contextmanager
def _folder_lock(folder: Path):
    """An exclusive flock on the folder itself, so two commands writing into one folder never
    lose each other's record lines (no lock file; where flock is missing, appends still are
    single whole-line writes)."""
    try:
        import fcntl

        fd = os.open(folder, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _appendable(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _COMPACT_AT:
            return False
        if not os.access(path, os.W_OK):  # read-only: rewritten (the folder is writable) instead
            return False
        with open(path, "rb") as f:
            return f.readline(4096).rstrip(b"\n") == _RECORD_HEADER.encode()
    except OSError:
        return False


def _record(path: Path, by: str, size: int, sha256: str, **more) -> None:
    import json

    folder = _folder_of(path)
    line = json.dumps({"name": path.name, "size": size, "sha256": sha256, "by": by, **more}, ensure_ascii=False)
    with _folder_lock(folder):
        record = folder / OUTPUTS_RECORD
        if _appendable(record):
            append_line(record, line)
            return
        # missing, damaged (only reached with --force: the check refuses it otherwise) or long:
        # written anew with its readable entries, the last two of each file still there
        kept: list[str] = []
        if not record.is_symlink() and record.is_file() and read_records(folder).problem is None:
            last: dict[str, list[str]] = {}
            with open(record, encoding="utf-8", errors="replace") as f:
                for old in f:
                    e = _entry(old) if old.endswith("\n") else None
                    if e is not None and (folder / e["name"]).is_file():
                        last.setdefault(e["name"], []).append(old.rstrip("\n"))
            kept = [x for lines in last.values() for x in lines[-2:]]
        if record.is_dir() and not record.is_symlink():
            raise OutputError(f"{record} is a folder; move it aside (sag2wb records the files it writes there)")
        atomic_write_text(record, "\n".join([_RECORD_HEADER, *kept, line]) + "\n")


def record_output(path, by: str) -> None:
    """Record an existing file (written by sag2wb without `atomic_writer`, e.g. an index) as ours."""
    path, st = Path(path), os.stat(path)
    stat = [st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]  # then not_ours need not read it while it stays
    if repr([path.name, st.st_size, stat, by]) not in read_records(_folder_of(path)).stats:  # else recorded as it is
        _record(path, by, st.st_size, file_sha256(path), stat=stat)


def same_file(a, b) -> bool:
    """True when two paths name the same existing file (hard links and symlinks included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _same(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return same_file(a, b)
    return os.path.abspath(a) == os.path.abspath(b)


def _inside(path: Path, folder: Path) -> bool:
    """`path` is `folder` or lies somewhere below it (symlinks resolved)."""
    try:
        path, folder = path.resolve(), folder.resolve()
    except OSError:
        return False
    return path == folder or folder in path.parents


def check_name(option: str, value: str) -> str:
    """`value` as a single path component (a split, a tag that names a file): no separator,
    no `..`, not absolute, no NUL, not empty."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or "/" in value
        or "\\" in value
        or "\0" in value
        or value in (".", "..")
        or os.path.isabs(value)
    ):
        raise OutputError(f"{option} {value!r}: give a plain name (no '/', '..', absolute path or NUL)")
    return value


@dataclass
class _Output:
    option: str
    path: Path
    kind: str  # "file" or "dir"
    ours: Callable[[Path], bool] | None  # a further test of a recorded file (e.g. the kind of result)
    hold_inputs: bool  # a folder output may hold input files (never replaced); False: refused without force
    ours_name: str = "a result written by sag2wb"  # what is replaced, for the message
    existing_ok: bool = False  # the caller checked (or wrote) an existing file itself
    by: str | None = None  # what writes it ("eval --run"): only a file recorded as written by that is replaced


class Outputs:
    """One command's inputs, outputs and resume files; `check()` refuses every bad output
    at once, before any work. `force`: True/False for commands with `--force`, None for those
    without (their refusals then suggest no --force).

    An existing file is replaced only when it is ours by provenance (`not_ours`: its size and
    sha256 are in its folder's record) and, when given, `ours(path)` holds too (an eval result
    is no ablation result). A command may declare more outputs once it knows
    them (convert's files, eval's trace files) and call `check()` again, still before writing.
    `options` is the set of options declared, which the CLI compares with the parser's
    output options so that a new command cannot forget one.
    """

    def __init__(self, force: bool | None = False, command: str | None = None):
        self.force = force
        self.command = command  # the sag2wb command: an output's writer is "COMMAND OPTION" unless given
        self.inputs: list[tuple[str, Path]] = []
        self.outputs: list[_Output] = []
        self.resumes: list[tuple[str, Path]] = []
        self.options: set[str] = set()

    def input(self, option: str, path) -> None:
        """A path this command reads (None, and `irds:` names, are skipped)."""
        self.options.add(option)
        if path is None or str(path).startswith("irds:"):
            return
        self.inputs.append((option, Path(path)))

    def output(
        self,
        option: str,
        path,
        *,
        ours: Callable[[Path], bool] | None = None,
        kind: str = "file",
        hold_inputs: bool = True,
        ours_name: str = "a result written by sag2wb",
        existing_ok: bool = False,
        by: str | None = None,
    ) -> Path:
        """A file (or, `kind="dir"`, a folder) this command writes; returns it as a Path.
        `existing_ok`: an existing file there was checked (or written) by the caller already. `by`:
        what records writing it (default "COMMAND OPTION" of a command's `Outputs`, else any writer)."""
        self.options.add(option)
        if "\0" in str(path) or not str(path):
            raise OutputError(f"{option} {str(path)!r}: not a usable path")
        if by is None and self.command:
            by = f"{self.command} {option}"
        out = _Output(option, Path(path), kind, ours, hold_inputs, ours_name, existing_ok, by)
        self.outputs.append(out)
        return out.path

    def resume(self, option: str, path) -> None:
        """A resume file of `option`'s output: read and appended to, so no output may be it."""
        self.resumes.append((option, Path(path)))

    def _force_hint(self, what: str) -> str:
        return f", or pass --force to {what}" if self.force is not None else ""

    def check(self) -> None:
        self._records: dict[str, Records] = {}  # each folder's record read once per check
        for i, o in enumerate(self.outputs):
            self._check_one(o, self.outputs[:i])

    def records(self, folder: Path) -> Records:
        key = os.path.abspath(folder)
        if key not in self._records:
            self._records[key] = read_records(folder)
        return self._records[key]

    def not_ours(self, o: _Output) -> str | None:
        """Why the existing output file `o` may not be replaced without --force (None: it may)."""
        reason = not_ours(o.path, self.records(_folder_of(o.path)), o.by)
        if reason is None and o.ours is not None and not o.ours(o.path):
            reason = f"sag2wb wrote it, but not as what {o.option} writes"
        return reason

    def _check_one(self, o: _Output, earlier: list[_Output]) -> None:
        shown = f"{o.option} {o.path}"
        if o.path.name == OUTPUTS_RECORD:
            raise OutputError(f"{shown} is sag2wb's record of the files it wrote in a folder; choose another name")
        for opt, inp in self.inputs:
            named = f"{opt} {inp}".strip()
            if _same(o.path, inp):
                raise OutputError(f"{shown} is an input of this command ({named}); choose another path")
            # a file of an input folder may be read by this command: only one of ours is replaced
            if (
                o.kind == "file"
                and inp.is_dir()
                and _inside(o.path, inp)
                and o.path.is_file()
                and self.not_ours(o) is not None
            ):
                raise OutputError(f"{shown} is inside the input folder {named} and exists; choose another path")
            if o.kind == "dir" and not o.hold_inputs and not self.force and _inside(inp, o.path):
                raise OutputError(
                    f"{shown} holds an input of this command ({named}); choose another folder"
                    + self._force_hint("write beside it (input files are never replaced)")
                )
        for other in earlier:
            if _same(o.path, other.path):
                also = "" if other.option == o.option else f" is also {other.option}"
                raise OutputError(
                    f"{shown}{also or ' is written twice by this command'}; give each output its own path"
                )
        for opt, resume in self.resumes:
            if _same(o.path, resume):
                raise OutputError(f"{shown} is the resume file of {opt}; choose another file")
        if o.kind == "file" and o.path.is_dir():
            raise OutputError(f"{shown} is a directory; give a file path")
        if o.kind == "dir" and o.path.exists() and not o.path.is_dir():
            raise OutputError(f"{shown} is a file, not a directory (it is in the way of a folder); give a folder path")
        if o.kind == "file" and os.path.lexists(o.path) and not (self.force or o.existing_ok):
            reason = self.not_ours(o)
            if reason is not None:
                raise OutputError(
                    f"{shown} exists and is not {o.ours_name} ({reason}); choose another path"
                    + self._force_hint("replace it")
                )
        records = self.records(_folder_of(o.path))
        if o.kind == "file" and records.path.is_dir() and not records.path.is_symlink():
            raise OutputError(f"{shown}: {records.path} is a folder; move it aside (sag2wb records its files there)")
        if o.kind == "file" and not (self.force or o.existing_ok) and records.problem:
            raise OutputError(
                f"{shown}: sag2wb's record of the files it wrote there, {records.path}, is damaged "
                f"({records.problem}); move it aside" + self._force_hint("start it anew")
            )
        folder = o.path if o.kind == "dir" else o.path.parent
        existing = next((d for d in [folder, *folder.parents] if d.exists()), Path("."))
        if not existing.is_dir():
            raise OutputError(f"{shown}: {existing} is a file, not a folder; choose another path")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise OutputError(
                f"{shown}: cannot write in {existing} (read-only or no permission); choose a writable folder"
            )


def check_output(path, *, inputs=(), ours=None, force: bool = False, what: str = "--out") -> Path:
    """One output checked alone (see `Outputs`): refused when it is one of `inputs`, a folder,
    or an existing file sag2wb has no record of writing (`not_ours`; `ours`, when given, must
    hold too); `force` allows the latter only.

    >>> atomic_write_text("q.jsonl", "{}\\n")
    >>> check_output("q.jsonl", inputs=["q.jsonl"])
    Traceback (most recent call last):
    ...
    workbench.safeio.OutputError: --out q.jsonl is an input of this command (q.jsonl); choose another path
    >>> check_output("results.jsonl", inputs=["q.jsonl"])
    PosixPath('results.jsonl')
    """
    io = Outputs(force=force)
    for inp in inputs:
        if inp is not None:
            io.inputs.append(("", Path(inp)))
    out = io.output(what, path, ours=ours)
    io.check()
    return out
