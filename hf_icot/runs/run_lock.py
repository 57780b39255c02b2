"""One run at a time in a run folder: a lock the run's main process holds from before it looks at the folder until
it exits.

The lock is ``fcntl.flock`` on ``output_dir/.icot-run.lock``: the kernel drops it when its process dies, however it
dies, so a crashed or SIGKILLed run leaves nothing to clean up, and the next run takes it. The file records who holds
it (pid, host, start time) for the refusal's sentence; it is removed when the run ends. A run that finds the lock
held is refused before it changes anything (with 2 processes, every process is refused with the main one's
sentence). ``flock`` is advisory and per host on some network filesystems; a run on another machine that shares the
folder over NFS is seen where the NFS client forwards locks (Linux does).
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

LOCK_FILE = ".icot-run.lock"


class RunLock:
    """The lock of one run folder (see the module docstring); :meth:`acquire`, then :meth:`release` at the end."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.folder = Path(output_dir)
        self.path = self.folder / LOCK_FILE
        self._fd: int | None = None
        self._created_folder = False

    def acquire(self) -> None:
        """Take the lock, creating the folder if needed.

        Raises:
            ValueError: another live run holds it; the sentence names its pid and host.
        """
        import fcntl

        self._created_folder = not self.folder.exists()
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                self._forget_folder()
                raise ValueError(
                    f"output_dir {str(self.folder)!r} is in use by another run ({holder}); wait for it to end, or "
                    "give another --output_dir."
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file the previous holder removed between our open and our lock
                break
            os.close(fd)
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.ftruncate(fd, 0)
        os.write(fd, (json.dumps(holder) + "\n").encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the lock file and drop the lock (removing the folder too if the run created it and left it
        empty); a no-op when not held."""
        if self._fd is None:
            return
        try:
            self.path.unlink()  # while still locked: a run waiting on this file sees it is gone and opens anew
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None
        self._forget_folder()

    def _forget_folder(self) -> None:
        if self._created_folder:
            try:
                self.folder.rmdir()  # only if empty: a run that wrote nothing leaves no folder
            except OSError:
                pass


def _read_holder(fd: int) -> str:
    try:
        holder: dict[str, Any] = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        holder = {}
    if "pid" not in holder:
        return "its lock file does not say which"
    return f"pid {holder['pid']} on {holder.get('host', 'an unknown host')}, started {holder.get('started', '?')}"
