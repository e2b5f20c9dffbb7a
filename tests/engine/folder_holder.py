"""A process that holds a folder's flock (as a training job's zoo.engine.run_lock does) until killed."""
import subprocess
import sys
import threading

HOLD = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY); "
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(120)")


def hold_folder(folder) -> subprocess.Popen:
    """Start the holder on ``folder`` and return once it holds it; the caller kills it."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    watchdog = threading.Timer(60, process.kill)  # a holder stuck on a held lock ends readline with EOF
    watchdog.start()
    try:
        assert process.stdout.readline().strip() == "held"
    finally:
        watchdog.cancel()
    return process
